//! The attempt loop: walk the request's `AttemptPlan`, send each attempt within its time gates,
//! classify the outcome with the one pure classifier, and answer (R4, R5, R9.3, R10, R12.1).
//!
//! This is the only place that sequences upstream attempts for a request.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::Method;
use std::sync::Arc;
use tokio::time::Instant;

use crate::billing::price;
use crate::config::model::{Client, Config};
use crate::error::{GatewayError, WireFormat};
use crate::http::body::ResponseBody;
use crate::http::body::{error_response, Resp};
use crate::relay::exchange::{exchange, non_stream_timeout, Exchange, Gates};
use crate::relay::finish::{attempt_record, observer, succeeded, Finish};
use crate::relay::gateway::Gateway;
use crate::relay::passthrough;
use crate::relay::respond::{failure_response, respond, transport_error, with_route, LastFailure};
use crate::relay::stream::{self, RelayTimes};
use crate::routing::backoff::backoff;
use crate::routing::family::{forward_idempotency_key, PathFamily};
use crate::routing::outcome::error_class;
use crate::routing::plan::{AttemptPlan, PlanInput};
use crate::routing::policy::{
    classify, map_status, possibly_charged, Decision, Facts, Outcome, Settings,
};
use crate::routing::table::Route;
use crate::state::autodisable::KeyMap;
use crate::state::breaker::Admission;
use crate::state::outcome as health;
use crate::state::Snapshot;
use crate::wire::dialect::StreamFormat;
use crate::wire::request::Peek;

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
    /// A task call (R10.5): classified with the task rule; a successful POST binds its task.
    pub is_task: bool,
    pub request_id: HeaderValue,
    pub started: std::time::Instant,
    /// The request's sticky key (R8).
    pub sticky: Option<crate::affinity::StickyKey>,
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
    // R7.1: the plan walks only enabled keys; `keys` maps its key positions back.
    let keys = KeyMap::new(
        routes
            .iter()
            .flat_map(|(_, r)| r.tiers.iter())
            .flat_map(|t| t.candidates.iter().map(|c| c.channel)),
        &snap,
    );
    let key_count = |id: usize| keys.count(id, snap.table.channels[id].keys.len());
    let key_start = |id: usize| snap.states[id].next_key_start(key_count(id));
    let now = Instant::now();
    // Availability is per (channel, upstream model): a virtual model's targets are separate.
    let available = |id: usize, upstream: &str| {
        health::available(&snap.table.channels[id], &snap.states[id], upstream, now)
    };
    let mut fin = Finish::new(gw, &job);
    let mut sticky = job
        .sticky
        .map(|k| crate::affinity::Sticky::lookup(&gw.bindings, &snap, &routes, k));
    let mut plan = AttemptPlan::new(
        &PlanInput {
            groups: &routes,
            tier_walk: cfg.routing.tier_walk,
            retry_times: cfg.routing.retry_times,
            cross_group_retry: job.client.cross_group_retry,
            key_count: &key_count,
            key_cursor: &key_start,
            available: &available,
            preferred: sticky.as_ref().and_then(|s| s.preferred),
        },
        &mut rng,
    );
    if let Some(s) = sticky.as_mut() {
        s.planned(plan.targets().first().map(|t| t.channel));
        fin.sticky(s.key.kind.as_str(), s.hit);
    }
    let budget = gw.budget();
    budget.record_first_attempt();

    let rid = job.request_id.to_str().unwrap_or("");
    // Token counting is free upstream: never precharged, never billed (R11.1).
    if job.family.billed() {
        let estimate = price::Estimate::new(
            job.body.len(),
            job.peek.as_ref().and_then(|p| p.completion_hint),
        );
        match gw
            .billing
            .begin(&job.client, &cfg.pricing, &job.model, estimate, rid)
            .await
        {
            Ok(session) => fin.billing = Some(session),
            Err(e) => {
                fin.set_error_code(e.code);
                fin.failed(e.status.as_u16());
                return error_response(&e, job.format);
            }
        }
    }
    let mut last = LastFailure::None;
    let mut decision: Option<Decision> = None;
    let mut first_target: Option<(usize, Arc<str>)> = None;
    let mut visits = health::Visits::new(&snap, &gw.store);
    let (header_timeout, non_stream_header_cap) = if job.family == PathFamily::Images {
        let t = cfg.timeouts.image_upstream_header;
        (t, Some(t))
    } else {
        (cfg.timeouts.upstream_header, None)
    };

    while let Some(mut step) = plan.next(decision.as_ref()) {
        step.key_index = keys.key(step.channel, step.key_index);
        let ch = &snap.table.channels[step.channel];
        if !fin.attempts.is_empty() {
            let wait = (step.same_target_retry > 0)
                .then(|| backoff(&ch.resilience.retry, step.same_target_retry, &mut rng));
            if wait.is_some_and(|w| Instant::now() + w >= deadline) {
                last = LastFailure::Gateway(GatewayError::deadline_exceeded());
                break;
            }
            // The budget is asked before anything is waited for or counted (R4.9).
            if !budget.try_acquire_retry() {
                metrics::counter!(crate::telemetry::RETRY_BUDGET_EXHAUSTED).increment(1);
                break;
            }
            if let Some(wait) = wait {
                metrics::counter!(crate::telemetry::RETRIES, "channel" => ch.name.clone())
                    .increment(1);
                tokio::time::sleep(wait).await;
            } else {
                let from = fin.attempts.last().map_or("", |a| a.channel.as_str());
                metrics::counter!(crate::telemetry::FAILOVERS, "from" => from.to_string(), "to" => ch.name.clone())
                    .increment(1);
            }
        }
        let first = first_target.get_or_insert((step.channel, step.upstream_model.clone()));
        let t0 = Instant::now();
        let gates = Gates {
            header_timeout,
            non_stream_header_cap,
            deadline,
            // R10.2: the first target's attempts, and every same-target retry of any target
            // (a retry after a failover repeats that target's request).
            send_idempotency_key: step.same_target_retry > 0
                || forward_idempotency_key(
                    (first.0, &*first.1),
                    step.channel,
                    &step.upstream_model,
                ),
        };
        // R6.1: the half-open probe is taken here; a refused attempt never reaches upstream.
        let admission = visits.admit(step.channel, &step.upstream_model, step.same_target_retry);
        let refused = admission == Admission::Refused;
        let ex = if refused {
            Exchange::Failed {
                outcome: health::refused_outcome(&ch.name),
                answer: None,
            }
        } else {
            exchange(gw, &job, &step, ch, &gates).await
        };
        let outcome = match ex {
            Exchange::Stream {
                status,
                headers,
                primed,
            } => {
                let st = &snap.states[step.channel];
                let (obs, route) = observer(
                    gw,
                    st,
                    fin,
                    &mut visits,
                    sticky.as_ref(),
                    &step,
                    ch,
                    status,
                    t0,
                );
                let times = RelayTimes {
                    keepalive: cfg.timeouts.keepalive,
                    idle: non_stream_timeout(cfg, ch),
                };
                let body = stream::commit(primed, times, Box::new(obs));
                return respond(status, &headers, body, cfg.debug_headers, &route);
            }
            Exchange::Passthrough {
                status,
                headers,
                head,
                body,
            } => {
                let st = &snap.states[step.channel];
                let (obs, route) = observer(
                    gw,
                    st,
                    fin,
                    &mut visits,
                    sticky.as_ref(),
                    &step,
                    ch,
                    status,
                    t0,
                );
                let idle = non_stream_timeout(cfg, ch);
                let body = passthrough::commit(head, body, idle, Box::new(obs));
                return respond(status, &headers, body, cfg.debug_headers, &route);
            }
            Exchange::Full {
                status,
                headers,
                body,
                usage,
            } => {
                if job.is_task && job.method == Method::POST {
                    crate::relay::task::bind_from_body(gw, &job.client.name, &ch.name, &body);
                }
                succeeded(
                    gw,
                    &snap.states[step.channel],
                    &mut fin,
                    &mut visits,
                    sticky.as_ref(),
                    &step,
                    ch,
                    status,
                    t0,
                );
                let route = fin.chain();
                fin.done(
                    &snap.states[step.channel],
                    &step.upstream_model,
                    status,
                    usage,
                    None,
                );
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
        let possibly_charged = possibly_charged(&outcome, job.family);
        let class = if refused {
            "circuit_open"
        } else {
            error_class(&outcome)
        };
        metrics::counter!(crate::telemetry::ATTEMPTS, "channel" => ch.name.clone(), "outcome" => class)
            .increment(1);
        fin.attempts.push(attempt_record(
            ch,
            step.key_index,
            upstream_status,
            class,
            t0,
            possibly_charged,
        ));
        if refused && snap.states[step.channel].is_disabled() {
            last = LastFailure::Gateway(GatewayError::no_channel_available(&job.model));
        } else if refused {
            last = LastFailure::Gateway(GatewayError::breaker_open(&ch.name));
        } else {
            visits.attempt(step.channel, step.key_index, &outcome, t0.elapsed());
        }
        match &outcome {
            Outcome::Transport(k) => last = LastFailure::Gateway(transport_error(*k)),
            Outcome::DeadlineExceeded => {
                last = LastFailure::Gateway(GatewayError::deadline_exceeded())
            }
            Outcome::ChannelError(m) => {
                let detail = format!("channel {} cannot send this request ({m})", ch.name);
                last = LastFailure::Gateway(GatewayError::upstream_unreachable(&detail))
            }
            Outcome::LocalAdapter(m) | Outcome::SkipRetry(m) => {
                last = LastFailure::Gateway(GatewayError::internal(m.clone()))
            }
            _ => {}
        }
        let facts = Facts {
            family: job.family,
            has_idempotency_key: job.idempotency_key.is_some(),
            is_task: job.is_task,
            alternatives_left: plan.alternatives_left(),
            same_target_retries: step.same_target_retry,
            attempts_left: plan.attempts_left(),
            affinity_skip_retry: sticky
                .as_ref()
                .is_some_and(|s| s.skip_retry(step.channel, fin.attempts.len() == 1)),
        };
        let settings = Settings {
            routing: &cfg.routing,
            retry: &ch.resilience.retry,
            images: &cfg.images_failover,
            status_code_mapping: &ch.status_code_mapping,
        };
        let mut d = classify(&outcome, &facts, &settings);
        if matches!(d, Decision::RetrySame { .. }) && admission != Admission::Admitted {
            // A refused target is not retried, and a half-open probe makes one attempt (R6.1).
            d = Decision::Return;
        }
        if !matches!(d, Decision::RetrySame { .. }) {
            visits.settle();
        }
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
    let route = fin.chain();
    let resp = failure_response(last, &snap, &job);
    fin.failed(resp.status().as_u16());
    with_route(resp, cfg.debug_headers, &route)
}
