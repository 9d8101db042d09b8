//! Admission of a request before its first attempt: the place where the request's limits
//! are checked, then its precharge taken (R15.1 puts the rate limits before the precharge;
//! R11.1). A refused request is answered here and never reaches an upstream.

use super::context::Context;
use super::finish::Finish;
use super::gateway::Gateway;
use crate::billing::price;
use crate::error::GatewayError;

/// Admit `cx`: precharge its estimate, holding the billing session in `fin` (settled or
/// refunded when the request ends). Token counting is free upstream: never precharged,
/// never billed (R11.1).
pub async fn admit(gw: &Gateway, cx: &Context, fin: &mut Finish) -> Result<(), GatewayError> {
    if !cx.family.billed() {
        return Ok(());
    }
    let estimate = price::Estimate::new(
        cx.body.len(),
        cx.peek.as_ref().and_then(|p| p.completion_hint),
    );
    let pricing = &cx.snap.table.config.pricing;
    let session = gw
        .billing
        .begin(&cx.client, pricing, &cx.model, estimate, cx.rid())
        .await?;
    fin.billing = Some(session);
    Ok(())
}
