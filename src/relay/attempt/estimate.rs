//! What one request is estimated to use (R11.1, R15.1, B-token-estimate): the precharge's and
//! the token limits' reservation, and the output limit the upstream is told when a client's
//! estimate moves money or tokens. Read by admission, the plan's key limits and the exchange.

use bytes::Bytes;

use crate::billing::price;
use crate::relay::context::Context;
use crate::routing::family::PathFamily;

/// What the precharge and the token limits reserve for `cx` (R11.1, R15.1): the output is
/// the request's own limit, else the model's `pricing.<model>.max_output`, else 1024.
pub fn estimate(cx: &Context) -> price::Estimate {
    price::Estimate {
        prompt_tokens: cx.prompt_tokens(),
        completion_tokens: cx
            .peek
            .as_ref()
            .and_then(|p| p.completion_hint)
            .unwrap_or_else(|| price::default_output(cx.snap.table.config.pricing.get(cx.model()))),
    }
}

/// The output limit the upstream must be told for `cx` (B-token-estimate): a request of a
/// client whose estimate moves money or tokens — precharged (a quota, not trusted, a priced
/// model) or tpm-limited — that names no limit is sent the estimate's (the field and the
/// value), so the settle overshoot of R11.3 and the tpm reservation are true bounds.
pub fn output_bound(cx: &Context) -> Option<(&'static str, u64)> {
    let field = match cx.family {
        PathFamily::Chat | PathFamily::Completions | PathFamily::Messages => "max_tokens",
        PathFamily::Responses => "max_output_tokens",
        _ => return None,
    };
    if cx.peek.as_ref()?.completion_hint.is_some() {
        return None;
    }
    let price = cx.snap.table.config.pricing.get(cx.model());
    let precharged = cx.client.quota.is_some() && !cx.client.trusted && price.is_some();
    if !precharged && cx.client.limits.tpm == 0 {
        return None;
    }
    Some((field, price::default_output(price)))
}

/// `body` with [`output_bound`]'s limit added as its first member, when `cx` needs one
/// (`None`: it needs none, and the body goes as it is); the one hook where the upstream body
/// is built, `exchange::prepare`. A Chat Completions request gets it under `chat_field()`:
/// the output-limit field its channel takes (`compat::chat_output_field`), asked only when
/// a bound is added.
pub fn bound_output(
    cx: &Context,
    body: &Bytes,
    chat_field: impl FnOnce() -> &'static str,
) -> Option<Bytes> {
    let (field, n) = output_bound(cx)?;
    let field = match cx.family {
        PathFamily::Chat => chat_field(),
        _ => field,
    };
    // `"field":n` written on the stack (the field names are short, a u64 has at most 20
    // digits), then the new body in one allocation.
    let mut member = [0u8; 96];
    let mut w = &mut member[..];
    Some(
        match std::io::Write::write_fmt(&mut w, format_args!("\"{field}\":{n}")) {
            Ok(()) => {
                let len = 96 - w.len();
                crate::wire::json::insert_first_bytes(body, &member[..len])
            }
            Err(_) => crate::wire::json::insert_first(body, &format!("\"{field}\":{n}")),
        },
    )
}

/// [`estimate`] as tokens (prompt estimate + `max_tokens`).
pub fn estimate_tokens(cx: &Context) -> u64 {
    let estimated = estimate(cx);
    estimated.prompt_tokens + estimated.completion_tokens
}
