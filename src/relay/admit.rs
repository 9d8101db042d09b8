//! Admission of a request before its first attempt: the client's rate limits first (R15.1),
//! then its precharge (R11.1). A refused request is answered here — a 429 in the caller's
//! format with `Retry-After` and its SDK's rate-limit headers (R15.2) — and never reaches
//! an upstream nor pays anything. The limit admission is held in the request's `Finish`
//! until the request ends (a stream's last byte included) and settled to actual usage.

use std::time::SystemTime;

use bytes::Bytes;
use http::StatusCode;
use tokio::time::Instant;

use super::context::Context;
use super::finish::Finish;
use super::gateway::Gateway;
use crate::billing::price;
use crate::error::GatewayError;
use crate::http::body::{error_response, Resp};
use crate::limits::{refusal_headers, Admission, Kind, Refusal};
use crate::routing::family::PathFamily;
use crate::shared::limits::LimitGrant;
use crate::telemetry;
use crate::wire::usage::Usage;

/// A request's holds on rate limits: the client's, for the whole request, and the key of
/// the attempt that committed, to the end of its answer (stream included). Dropped
/// unsettled (a client disconnect, a cancelled task), each releases its concurrency and
/// keeps its reservation as the charge.
#[derive(Default)]
pub struct LimitHolds {
    client: Option<Admission<LimitGrant>>,
    pub key: Option<Admission<LimitGrant>>,
    /// The client's in-flight gauge, decremented when the holds end.
    in_flight: Option<metrics::Gauge>,
}

impl Drop for LimitHolds {
    fn drop(&mut self) {
        if let Some(g) = self.in_flight.take() {
            g.decrement(1.0);
        }
    }
}

impl LimitHolds {
    /// The request is over: settle to the tokens it used (input + output); a request that
    /// never reached an upstream gives its count and reservation back.
    pub fn settle(&mut self, usage: &Usage, reached_upstream: bool) {
        let now = Instant::now();
        let used = usage.prompt_tokens + usage.completion_tokens;
        if let Some(a) = self.client.take() {
            if reached_upstream {
                a.settle(used, now);
            } else {
                a.cancel(now);
            }
        }
        if let Some(a) = self.key.take() {
            a.settle(used, now);
        }
    }
}

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
                    let g = cx.client.in_flight_gauge.get(|| {
                        metrics::gauge!(telemetry::CLIENT_CONCURRENCY,
                            "client" => cx.client.name.clone())
                    });
                    g.increment(1.0);
                    g.clone()
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
        .begin(&cx.client, pricing, &cx.model, estimate, cx.rid())
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

/// What the precharge and the token limits reserve for `cx` (R11.1, R15.1): the output is
/// the request's own limit, else the model's `pricing.<model>.max_output`, else 1024.
pub fn estimate(cx: &Context) -> price::Estimate {
    price::Estimate {
        prompt_tokens: cx.prompt_tokens(),
        completion_tokens: cx
            .peek
            .as_ref()
            .and_then(|p| p.completion_hint)
            .unwrap_or_else(|| price::default_output(cx.snap.table.config.pricing.get(&cx.model))),
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
    let price = cx.snap.table.config.pricing.get(&cx.model);
    let precharged = cx.client.quota.is_some() && !cx.client.trusted && price.is_some();
    if !precharged && cx.client.limits.tpm == 0 {
        return None;
    }
    Some((field, price::default_output(price)))
}

/// `body` with [`output_bound`]'s limit added as its first member, when `cx` needs one
/// (the one hook where the upstream body is built, `exchange::prepare`).
pub fn bound_output(cx: &Context, body: Bytes) -> Bytes {
    match output_bound(cx) {
        Some((field, n)) => crate::wire::json::insert_first(&body, &format!("\"{field}\":{n}")),
        None => body,
    }
}

/// [`estimate`] as tokens (prompt estimate + `max_tokens`).
pub fn estimate_tokens(cx: &Context) -> u64 {
    let e = estimate(cx);
    e.prompt_tokens + e.completion_tokens
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
