//! The attempt loop: walk the request's `AttemptPlan`, send each attempt within its time gates,
//! classify the outcome with the one pure classifier, and answer (R4, R5, R9.3, R10, R12.1).
//!
//! This is the only place that sequences upstream attempts for a request.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use std::sync::Arc;
use tokio::time::Instant;

use super::body::ResponseBody;
use super::exchange::{exchange, Exchange, Gates};
use super::finish::{attempt_record, error_class, Finish, LogObserver};
use super::gateway::Gateway;
use super::handler::{error_response, Resp};
use super::relay::{self, RelayTimes};
use super::request::Peek;
use super::sse::StreamFormat;
use crate::config::model::{Client, Config};
use crate::error::{GatewayError, WireFormat};
use crate::routing::backoff::backoff;
use crate::routing::family::PathFamily;
use crate::routing::plan::{AttemptPlan, PlanInput};
use crate::routing::policy::{
    classify, map_status, Decision, Facts, Outcome, Settings, TransportKind,
};
use crate::routing::table::Route;
use crate::secret::scrub;
use crate::state::Snapshot;

/// Everything the loop needs about one client request.
pub struct Job {
    pub snap: Arc<Snapshot>,
    pub client: Arc<Client>,
    /// (group, route) in the order groups are tried (R5).
    pub routes: Vec<(String, Arc<Route>)>,
    pub method: Method,
    pub path: String,
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub peek: Option<Peek>,
    pub model: String,
    pub family: PathFamily,
    pub format: WireFormat,
    pub stream_format: StreamFormat,
    pub idempotency_key: Option<HeaderValue>,
    pub request_id: HeaderValue,
    pub started: std::time::Instant,
}

/// The last failure, kept to answer the client if nothing succeeds.
enum LastFailure {
    None,
    Upstream {
        status: u16,
        headers: HeaderMap,
        body: Bytes,
    },
    Gateway(GatewayError),
}

pub async fn run(gw: &Arc<Gateway>, job: Job) -> Resp {
    let snap = job.snap.clone();
    let cfg: &Config = &snap.table.config;
    let deadline = Instant::now() + cfg.timeouts.request_deadline;
    let mut rng = fastrand::Rng::new();
    let routes: Vec<(&str, &Route)> = job
        .routes
        .iter()
        .map(|(g, r)| (g.as_str(), r.as_ref()))
        .collect();
    let key_count = |id: usize| snap.table.channels[id].keys.len();
    let key_start = |id: usize| snap.states[id].next_key_start(snap.table.channels[id].keys.len());
    let available = |id: usize| !snap.states[id].is_disabled();
    let mut plan = AttemptPlan::new(
        &PlanInput {
            groups: &routes,
            tier_walk: cfg.routing.tier_walk,
            retry_times: cfg.routing.retry_times,
            cross_group_retry: job.client.cross_group_retry,
            key_count: &key_count,
            key_cursor: &key_start,
            available: &available,
        },
        &mut rng,
    );
    let budget = gw.budget();
    budget.record_first_attempt();

    let mut fin = Finish::new(gw, &job);
    let mut last = LastFailure::None;
    let mut decision: Option<Decision> = None;
    let mut first_channel: Option<usize> = None;
    let header_timeout = if job.family == PathFamily::Images {
        cfg.timeouts.image_upstream_header
    } else {
        cfg.timeouts.upstream_header
    };

    while let Some(step) = plan.next(decision.as_ref()) {
        let ch = &snap.table.channels[step.channel];
        if !fin.attempts.is_empty() {
            if step.same_target_retry > 0 {
                let wait = backoff(&ch.resilience.retry, step.same_target_retry, &mut rng);
                if Instant::now() + wait >= deadline {
                    last = LastFailure::Gateway(GatewayError::deadline_exceeded());
                    break;
                }
                metrics::counter!(crate::telemetry::RETRIES, "channel" => ch.name.clone())
                    .increment(1);
                tokio::time::sleep(wait).await;
            } else {
                metrics::counter!(crate::telemetry::FAILOVERS, "channel" => ch.name.clone())
                    .increment(1);
            }
            if !budget.try_acquire_retry() {
                metrics::counter!(crate::telemetry::RETRY_BUDGET_EXHAUSTED).increment(1);
                break;
            }
        }
        let first = *first_channel.get_or_insert(step.channel);
        let t0 = Instant::now();
        let gates = Gates {
            header_timeout,
            deadline,
            send_idempotency_key: step.channel == first,
        };
        let outcome = match exchange(gw, &job, &step, ch, &gates).await {
            Exchange::Stream {
                status,
                headers,
                primed,
            } => {
                fin.attempts.push(attempt_record(
                    ch,
                    step.key_index,
                    Some(status),
                    "success",
                    t0,
                    false,
                ));
                metrics::histogram!(crate::telemetry::UPSTREAM_DURATION, "channel" => ch.name.clone()).record(t0.elapsed().as_secs_f64());
                let route = fin.chain();
                let mut obs = LogObserver::new(
                    fin,
                    ch.name.clone(),
                    step.upstream_model.to_string(),
                    status,
                );
                obs.request_bytes = job.body.len();
                let times = RelayTimes {
                    keepalive: cfg.timeouts.keepalive,
                    idle: cfg.timeouts.non_stream,
                };
                let body = relay::commit(primed, times, Box::new(obs));
                return respond(status, &headers, body, cfg.debug_headers, &route);
            }
            Exchange::Full {
                status,
                headers,
                body,
                usage,
            } => {
                fin.attempts.push(attempt_record(
                    ch,
                    step.key_index,
                    Some(status),
                    "success",
                    t0,
                    false,
                ));
                metrics::histogram!(crate::telemetry::UPSTREAM_DURATION, "channel" => ch.name.clone()).record(t0.elapsed().as_secs_f64());
                let route = fin.chain();
                fin.done(&ch.name, &step.upstream_model, status, usage, None);
                return respond(
                    status,
                    &headers,
                    ResponseBody::full(body),
                    cfg.debug_headers,
                    &route,
                );
            }
            Exchange::Failed { outcome, answer } => {
                if let Some(a) = answer {
                    last = LastFailure::Upstream {
                        status: a.status,
                        headers: a.headers,
                        body: a.body,
                    };
                }
                outcome
            }
        };
        let upstream_status = match &outcome {
            Outcome::Status { code, .. } => Some(*code),
            _ => None,
        };
        let possibly_charged = matches!(outcome, Outcome::Transport(k) if matches!(k, TransportKind::HeaderTimeout | TransportKind::FirstByteTimeout | TransportKind::BodyTimeout | TransportKind::Broken | TransportKind::Reset))
            && !crate::routing::family::retryable(job.family, false);
        fin.attempts.push(attempt_record(
            ch,
            step.key_index,
            upstream_status,
            error_class(&outcome),
            t0,
            possibly_charged,
        ));
        metrics::counter!(crate::telemetry::ATTEMPTS, "channel" => ch.name.clone(), "outcome" => error_class(&outcome)).increment(1);
        match &outcome {
            Outcome::Transport(k) => last = LastFailure::Gateway(transport_error(*k)),
            Outcome::DeadlineExceeded => {
                last = LastFailure::Gateway(GatewayError::deadline_exceeded())
            }
            Outcome::LocalAdapter(m) | Outcome::ChannelError(m) | Outcome::SkipRetry(m) => {
                last = LastFailure::Gateway(GatewayError::internal(m.clone()))
            }
            _ => {}
        }
        let facts = Facts {
            family: job.family,
            has_idempotency_key: job.idempotency_key.is_some(),
            is_task: false,
            alternatives_left: plan.alternatives_left(),
            same_target_retries: step.same_target_retry,
            attempts_left: plan.attempts_left(),
            affinity_skip_retry: false,
        };
        let settings = Settings {
            routing: &cfg.routing,
            retry: &ch.resilience.retry,
            images: &cfg.images_failover,
            status_code_mapping: &ch.status_code_mapping,
        };
        let d = classify(&outcome, &facts, &settings);
        if let (Outcome::Status { code, .. }, LastFailure::Upstream { status, .. }) =
            (&outcome, &mut last)
        {
            *status = map_status(*code, &ch.status_code_mapping);
        }
        if matches!(d, Decision::Return | Decision::Done) {
            break;
        }
        decision = Some(d);
    }
    let secrets: Vec<_> = snap
        .table
        .channels
        .iter()
        .flat_map(|c| c.keys.iter().cloned())
        .collect();
    let route = fin.chain();
    let resp = match last {
        LastFailure::None => {
            error_response(&GatewayError::no_channel_available(&job.model), job.format)
        }
        LastFailure::Gateway(e) => error_response(&e, job.format),
        LastFailure::Upstream {
            status,
            headers,
            body,
        } => {
            let text = String::from_utf8_lossy(&body);
            let clean = Bytes::from(scrub(&text, &secrets));
            let st = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            respond(st.as_u16(), &headers, ResponseBody::full(clean), false, "")
        }
    };
    fin.failed(resp.status().as_u16());
    with_route(resp, cfg.debug_headers, &route)
}

fn transport_error(k: TransportKind) -> GatewayError {
    match k {
        TransportKind::HeaderTimeout
        | TransportKind::FirstByteTimeout
        | TransportKind::BodyTimeout => GatewayError::upstream_timeout(&format!("{k:?}")),
        _ => GatewayError::upstream_unreachable(&format!("{k:?}")),
    }
}

/// Response headers from upstream that are not relayed.
fn skip_header(name: &str) -> bool {
    matches!(
        name,
        "content-length"
            | "transfer-encoding"
            | "connection"
            | "keep-alive"
            | "set-cookie"
            | "server"
            | "date"
            | "x-request-id"
            | "alt-svc"
            | "upgrade"
    )
}

fn respond(status: u16, up: &HeaderMap, body: ResponseBody, debug: bool, route: &str) -> Resp {
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (k, v) in up {
        if !skip_header(k.as_str()) {
            r.headers_mut().append(k.clone(), v.clone());
        }
    }
    if !r.headers().contains_key(header::CONTENT_TYPE) {
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    with_route(r, debug, route)
}

fn with_route(mut r: Resp, debug: bool, route: &str) -> Resp {
    if debug && !route.is_empty() {
        if let Ok(v) = HeaderValue::try_from(route) {
            r.headers_mut().insert("x-switchyard-route", v);
        }
    }
    r
}
