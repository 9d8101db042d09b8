//! One upstream exchange: build the request for a step, send it within the header gate, and
//! turn the response into either an answer for the client or a classified failure (R9.2–R9.7).

use bytes::Bytes;
use http::header::{self, HeaderMap};
use tokio::time::{timeout_at, Instant};

use super::attempt::Job;
use super::convert;
use super::gateway::Gateway;
use super::relay::{self, Primed};
use super::request::rewrite_model;
use super::upstream::{self, Outgoing};
use super::usage::Usage;
use crate::config::model::Channel;
use crate::routing::plan::Step;
use crate::routing::policy::{Outcome, TransportKind};

/// A failed exchange's upstream answer, kept to relay to the client if nothing succeeds.
pub struct UpstreamFailure {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// What one exchange produced.
pub enum Exchange {
    /// A stream whose first event arrived: ready to commit.
    Stream {
        status: u16,
        headers: HeaderMap,
        primed: Primed,
    },
    /// A complete non-stream success.
    Full {
        status: u16,
        headers: HeaderMap,
        body: Bytes,
        usage: Usage,
    },
    /// A failure for the classifier, with the upstream answer when there was one.
    Failed {
        outcome: Outcome,
        answer: Option<UpstreamFailure>,
    },
}

/// Per-exchange knobs computed by the loop.
pub struct Gates {
    pub header_timeout: std::time::Duration,
    pub deadline: Instant,
    /// Whether the client's Idempotency-Key goes on this exchange (R10.2).
    pub send_idempotency_key: bool,
}

pub async fn exchange(gw: &Gateway, job: &Job, step: &Step, ch: &Channel, g: &Gates) -> Exchange {
    let cfg = &job.snap.table.config;
    let body = match (&job.peek, step.upstream_model.is_empty()) {
        (Some(p), false) => rewrite_model(&job.body, p, &step.upstream_model),
        _ => job.body.clone(),
    };
    let plan = convert::plan(ch.stream_policy, &job.path, job.peek.as_ref(), body);
    let body = plan.body.clone();
    let req = upstream::build(Outgoing {
        channel: ch,
        key: ch.keys.get(step.key_index),
        method: job.method.clone(),
        path_and_query: &job.path_and_query,
        client_headers: &job.headers,
        body,
        idempotency_key: job
            .idempotency_key
            .as_ref()
            .filter(|_| g.send_idempotency_key),
        request_id: &job.request_id,
    });
    let req = match req {
        Ok(r) => r,
        Err(e) => return failed(Outcome::LocalAdapter(e)),
    };
    let gate = (Instant::now() + g.header_timeout).min(g.deadline);
    let resp = match timeout_at(gate, gw.upstream.send(req)).await {
        Err(_) if gate == g.deadline => return failed(Outcome::DeadlineExceeded),
        Err(_) => return failed(Outcome::Transport(TransportKind::HeaderTimeout)),
        Ok(Err(kind)) => return failed(Outcome::Transport(kind)),
        Ok(Ok(r)) => r,
    };
    let (parts, mut inc) = resp.into_parts();
    let status = parts.status.as_u16();
    if !(200..300).contains(&status) {
        let body = relay::read_error(&mut inc, g.deadline).await;
        let outcome = relay::status_outcome(status, &body);
        return Exchange::Failed {
            outcome,
            answer: Some(UpstreamFailure {
                status,
                headers: parts.headers,
                body,
            }),
        };
    }
    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let ns = if ch.non_stream_timeout.is_zero() {
        cfg.timeouts.non_stream
    } else {
        ch.non_stream_timeout
    };
    if is_sse {
        let t_ns = Instant::now() + ns;
        return match relay::prime(inc, job.stream_format, cfg.timeouts.first_byte, g.deadline).await
        {
            Ok(primed) => match (plan.mode, plan.dialect) {
                (convert::Mode::Assemble, Some(d)) => {
                    match relay::assemble(primed, d, t_ns.min(g.deadline)).await {
                        Ok((body, usage)) => Exchange::Full {
                            status,
                            headers: convert::with_content_type(parts.headers, false),
                            body,
                            usage,
                        },
                        Err(o) => failed(o),
                    }
                }
                _ => {
                    let mut primed = primed;
                    if plan.hide_usage_chunk {
                        primed.hide_usage_chunk();
                    }
                    Exchange::Stream {
                        status,
                        headers: parts.headers,
                        primed,
                    }
                }
            },
            Err(o) => failed(o),
        };
    }
    match relay::read_full(&mut inc, (Instant::now() + ns).min(g.deadline)).await {
        Err(kind) => failed(Outcome::Transport(kind)),
        Ok(b) if b.is_empty() => failed(Outcome::Transport(TransportKind::EmptyBody)),
        Ok(b) => match super::hidden::body_hidden_error(&b) {
            Some(code) => {
                let code = code.unwrap_or(502);
                let outcome = relay::status_outcome(code, &b);
                Exchange::Failed {
                    outcome,
                    answer: Some(UpstreamFailure {
                        status: code,
                        headers: parts.headers,
                        body: b,
                    }),
                }
            }
            None => {
                let usage = Usage::from_body(&b).unwrap_or_default();
                let (headers, b) = convert::replay_if_planned(&plan, parts.headers, b);
                Exchange::Full {
                    status,
                    headers,
                    body: b,
                    usage,
                }
            }
        },
    }
}

fn failed(outcome: Outcome) -> Exchange {
    Exchange::Failed {
        outcome,
        answer: None,
    }
}
