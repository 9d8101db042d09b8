//! A JSON answer of one exchange (R9.5, R16.1): read whole (bounded) and inspected for a
//! hidden error and its usage, translated into the client's format when the attempt is, or
//! streamed through when too large to inspect.

use http::header::HeaderMap;
use tokio::time::Instant;

use crate::relay::attempt::exchange::{failed, upstream_failed, Answer, Exchange};
use crate::relay::attempt::translated::{self, Xlate};
use crate::relay::context::Context;
use crate::routing::policy::{Outcome, TransportKind};
use crate::upstream::body::UpBody;
use crate::upstream::read;
use crate::wire::convert;
use crate::wire::usage::Usage;

/// A JSON answer: read whole (bounded) and inspected, or streamed through when too large;
/// translated into the client's format when the attempt is.
#[allow(clippy::too_many_arguments)]
pub(in crate::relay) async fn whole(
    cx: &Context,
    plan: &convert::Plan,
    x: Option<Xlate>,
    status: u16,
    headers: HeaderMap,
    mut inc: UpBody,
    t_ns: Instant,
) -> Exchange {
    let b = match read::read_json(&mut inc, t_ns).await {
        Err(kind) => return failed(Outcome::Transport(kind)),
        Ok(read::Read::TooLarge(_)) if x.is_some() => return failed(translated::untranslatable()),
        Ok(read::Read::TooLarge(head)) => {
            return Exchange::Answer(Answer::Passthrough {
                status,
                headers,
                head,
                body: Box::new(inc),
            })
        }
        Ok(read::Read::Whole(b)) => b,
    };
    if b.is_empty() {
        return failed(Outcome::Transport(TransportKind::EmptyBody));
    }
    if let Some(code) = crate::wire::hidden::body_hidden_error(&b) {
        return upstream_failed(code.unwrap_or(502), headers, b, x);
    }
    let (headers, b, usage) = match x {
        None => match usage_of(&b) {
            Ok(u) => (headers, b, u),
            Err(o) => return failed(o),
        },
        Some(x) => match x.answer(&b, cx.rid()) {
            Ok((body, usage)) => (translated::json_headers(headers), body, usage),
            Err(r) => {
                let answer = Some(r.failure(headers));
                return Exchange::Failed {
                    outcome: r.outcome,
                    answer,
                };
            }
        },
    };
    let (headers, b) = convert::replay_if_planned(plan, headers, b);
    Exchange::Answer(Answer::Full {
        status,
        headers,
        body: b,
        usage,
    })
}

/// The usage of an untranslated JSON answer; `Err`: a JSON answer cut short.
fn usage_of(b: &[u8]) -> Result<Usage, Outcome> {
    let usage = match Usage::from_body(b) {
        Some(u) => u,
        // A JSON answer that does not parse was cut short (or is not JSON at all): a broken
        // answer, never a success.
        None if serde_json::from_slice::<serde::de::IgnoredAny>(b).is_err() => {
            return Err(Outcome::Transport(TransportKind::Broken));
        }
        None => Usage::default(),
    };
    Ok(usage)
}
