//! Admission of a request before its first attempt: the client's rate limits first (R15.1),
//! then its precharge (R11.1). A refused request is answered here — a 429 in the caller's
//! format with `Retry-After` and its SDK's rate-limit headers (R15.2) — and never reaches
//! an upstream nor pays anything. The limit admission is held in the request's `Finish`
//! until the request ends (a stream's last byte included) and settled to actual usage.

use std::time::SystemTime;

use http::StatusCode;
use tokio::time::Instant;

use crate::error::GatewayError;
use crate::http::body::{error_response, Resp};
use crate::limits::{refusal_headers, Kind, Refusal};
use crate::relay::answer::finish::Finish;
use crate::relay::attempt::estimate::estimate;
use crate::relay::attempt::holds::LimitHolds;
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::telemetry;
use crate::wire::usage::Usage;

/// Why a request was not admitted: its answer is ready.
pub struct Refused {
    pub error: GatewayError,
    pub resp: Resp,
}

/// Admit `cx`: take its rate limits, then precharge its estimate; both are held in `fin`
/// (settled or given back when the request ends). Token counting is free upstream: never
/// precharged, never billed (R11.1), but it counts against the request limits.
pub async fn admit(gw: &Gateway, cx: &Context, fin: &mut Finish) -> Result<(), Refused> {
    let estimate = estimate(cx);
    let limits = &cx.client.limits;
    if !limits.is_unlimited() {
        let tokens = estimate.prompt_tokens + estimate.completion_tokens;
        let limiter = gw.limiter();
        match limiter
            .admit_client(&cx.client.name, limits, tokens, Instant::now())
            .await
        {
            Ok(a) => {
                let in_flight = (limits.concurrency > 0).then(|| {
                    let gauge = cx.client.in_flight_gauge.get(|| {
                        metrics::gauge!(telemetry::CLIENT_CONCURRENCY,
                            "client" => cx.client.name.clone())
                    });
                    gauge.increment(1.0);
                    gauge.clone()
                });
                fin.limit = LimitHolds {
                    client: Some(a),
                    key: None,
                    in_flight,
                };
            }
            Err(r) => return Err(refused(cx, &r)),
        }
    }
    if !cx.family.billed() {
        return Ok(());
    }
    let pricing = &cx.snap.table.config.pricing;
    let session = gw
        .billing
        .begin(&cx.client, pricing, cx.model(), estimate, cx.rid())
        .await;
    match session {
        Ok(s) => {
            fin.billing = Some(s);
            Ok(())
        }
        Err(e) => {
            // Nothing reached an upstream: the request count and reservation go back.
            fin.limit.settle(&Usage::default(), false);
            let resp = error_response(&e, cx.format);
            Err(Refused { error: e, resp })
        }
    }
}

/// The 429 of a refused admission, counted by client and kind.
fn refused(cx: &Context, r: &Refusal) -> Refused {
    metrics::counter!(telemetry::RATE_LIMITED, "client" => cx.client.name.clone(),
        "kind" => r.kind.as_str())
    .increment(1);
    let error = rate_limited(r);
    let mut resp = error_response(&error, cx.format);
    let headers = resp.headers_mut();
    for (name, value) in refusal_headers(r, cx.format, SystemTime::now()) {
        headers.insert(name, value);
    }
    Refused { error, resp }
}

/// The error of a refused admission: OpenAI's `rate_limit_exceeded` with type `requests` or
/// `tokens` (Anthropic callers get `rate_limit_error` from the status).
pub fn rate_limited(r: &Refusal) -> GatewayError {
    let kind = match r.kind {
        Kind::Tpm => "tokens",
        _ => "requests",
    };
    GatewayError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limit_exceeded",
        kind,
        r.to_string(),
    )
}
