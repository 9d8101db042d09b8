//! The attempt loop's hooks into channel health: plan-time availability, attempt admission
//! (the half-open probe is taken here) and recording outcomes into the breaker, cooldown,
//! health window and auto-disable rules (R6, R7).

use std::time::Duration;

use tokio::time::Instant;

use super::autodisable::{self, Applied};
use super::breaker::{Admission, Limits, Scope, State, Transition, Verdict};
use super::channel::ChannelState;
use super::cooldown;
use crate::config::model::Breaker as BreakerCfg;
use crate::config::model::{AutoDisable, BreakerScope, Channel, Routing};
use crate::routing::policy::{map_status, Outcome};
use crate::store::Store;

/// The breaker a call to `ch` for `model` uses: the provider breaker, or the model's
/// breaker under `scope: model` (R6.1). An empty model uses the provider breaker.
pub fn scope<'a>(ch: &Channel, model: &'a str) -> Scope<'a> {
    match ch.resilience.circuit_breaker.scope {
        BreakerScope::Model if !model.is_empty() => Some(model),
        _ => None,
    }
}

fn limits(ch: &Channel) -> Limits {
    Limits::of(&ch.resilience.circuit_breaker)
}

/// Plan-time availability: not disabled, breaker would admit, not cooled down. Non-mutating.
pub fn available(ch: &Channel, st: &ChannelState, model: &str, now: Instant) -> bool {
    !st.is_disabled()
        && st.breakers.would_admit(&limits(ch), scope(ch, model), now)
        && !st.cooldown.is_cooled_down(&ch.resilience.cooldown, now)
}

/// Is the channel cooling down (R6.4)? For affinity: a cooled-down channel gets no new
/// bindings and an existing binding to it is re-evaluated.
pub fn is_cooled_down(ch: &Channel, st: &ChannelState) -> bool {
    st.cooldown
        .is_cooled_down(&ch.resilience.cooldown, Instant::now())
}

/// Admission for one attempt (a same-target retry reuses the admission of its first try).
pub fn admit(ch: &Channel, st: &ChannelState, model: &str) -> Admission {
    let (a, t) = st
        .breakers
        .acquire(&limits(ch), scope(ch, model), Instant::now());
    if let Some(t) = t {
        report(&ch.name, t, t.to);
    }
    a
}

fn report(channel: &str, t: Transition, now: State) {
    metrics::gauge!(crate::telemetry::BREAKER_STATE, "channel" => channel.to_string())
        .set(now.gauge());
    metrics::counter!(crate::telemetry::BREAKER_TRANSITIONS, "channel" => channel.to_string(), "to" => t.to.name())
        .increment(1);
    tracing::info!(
        channel,
        from = t.from.name(),
        to = t.to.name(),
        "circuit breaker"
    );
}

/// Record one attempt right away: the health window and the auto-disable rules (R7.1, R7.3).
pub fn record_attempt(
    store: &Store,
    rules: &AutoDisable,
    ch: &Channel,
    st: &ChannelState,
    key: usize,
    outcome: &Outcome,
) -> Applied {
    if let Some(err) = super::health::is_error(outcome) {
        st.health.record(err, Instant::now());
    }
    match autodisable::should_disable(outcome, rules) {
        Some(reason) => {
            autodisable::apply(store, ch, st, key, &reason, crate::proxy::finish::now_ms())
        }
        None => Applied::Nothing,
    }
}

/// Record the end of one target visit (a whole same-target retry sequence counts once, R6.2)
/// into the breaker and the cooldown. `elapsed` is the last attempt's time to headers / to
/// the first stream event.
#[allow(clippy::too_many_arguments)]
pub fn record_visit(
    routing: &Routing,
    ch: &Channel,
    st: &ChannelState,
    model: &str,
    outcome: &Outcome,
    elapsed: Duration,
    probe: bool,
) {
    let now = Instant::now();
    let cb = &ch.resilience.circuit_breaker;
    let v = verdict(outcome, &ch.status_code_mapping, elapsed, cb);
    let (t, state) = st
        .breakers
        .record(&limits(ch), scope(ch, model), v, probe, now);
    if let Some(t) = t {
        report(&ch.name, t, state);
    } else if v != Verdict::Neutral && cb.enabled && cb.failure_threshold > 0 {
        // Model scope: the channel gauge follows the breaker of the latest finished call.
        st.metrics.breaker_state.set(state.gauge());
    }
    let cv = cooldown::verdict(
        outcome,
        &ch.status_code_mapping,
        routing,
        &ch.resilience.retry,
    );
    if st.cooldown.record(&ch.resilience.cooldown, cv, now) {
        tracing::info!(channel = %ch.name, duration = ?ch.resilience.cooldown.duration, "channel cooling down");
    }
}

/// Operator enable: clear breakers, cooldown and the health window.
pub fn reset(st: &ChannelState) {
    st.breakers.reset();
    st.cooldown.reset();
    st.health.reset();
}

/// The synthetic outcome of an attempt refused by an open breaker: a 503 that fails over
/// like any other (R6.1); the upstream is not called.
pub fn refused_outcome(channel: &str) -> Outcome {
    Outcome::Status {
        code: 503,
        error_code: Some("circuit_open".into()),
        error_type: Some("api_error".into()),
        message: format!("circuit breaker is open - provider {channel} temporarily unavailable"),
    }
}

struct Pending {
    channel: usize,
    outcome: Outcome,
    elapsed: Duration,
    probe: bool,
}

/// One request's bookkeeping of target visits: admission per visit, per-attempt recording,
/// and one breaker/cooldown result per visit, settled when the loop moves off the target
/// (or when this is dropped, i.e. the loop ended).
pub struct Visits<'a> {
    snap: &'a super::Snapshot,
    store: &'a Store,
    model: &'a str,
    current: Option<(usize, Admission)>,
    pending: Option<Pending>,
}

impl<'a> Visits<'a> {
    pub fn new(snap: &'a super::Snapshot, store: &'a Store, model: &'a str) -> Self {
        Visits {
            snap,
            store,
            model,
            current: None,
            pending: None,
        }
    }

    /// Admission for an attempt on `channel`; a same-target retry keeps its visit's admission.
    pub fn admit(&mut self, channel: usize, same_target_retry: u32) -> Admission {
        if same_target_retry > 0 {
            if let Some((c, a)) = self.current {
                if c == channel {
                    return a;
                }
            }
        }
        self.settle();
        let (Some(ch), Some(st)) = (
            self.snap.table.channels.get(channel),
            self.snap.states.get(channel),
        ) else {
            return Admission::Admitted;
        };
        // A disabled channel is never called, even when the plan fell back to every candidate.
        let a = if st.is_disabled() {
            Admission::Refused
        } else {
            admit(ch, st, self.model)
        };
        self.current = Some((channel, a));
        a
    }

    /// Record one attempt's outcome (not for refused attempts). Returns what auto-disable did.
    pub fn attempt(
        &mut self,
        channel: usize,
        key: usize,
        outcome: &Outcome,
        elapsed: Duration,
    ) -> Applied {
        let (Some(ch), Some(st)) = (
            self.snap.table.channels.get(channel),
            self.snap.states.get(channel),
        ) else {
            return Applied::Nothing;
        };
        let Some((c, a)) = self.current else {
            return Applied::Nothing;
        };
        if c != channel || a == Admission::Refused {
            return Applied::Nothing;
        }
        self.pending = Some(Pending {
            channel,
            outcome: outcome.clone(),
            elapsed,
            probe: a == Admission::Probe,
        });
        record_attempt(
            self.store,
            &self.snap.table.config.auto_disable,
            ch,
            st,
            key,
            outcome,
        )
    }

    /// The loop moves off the current target: its visit counts now.
    pub fn settle(&mut self) {
        self.current = None;
        let Some(p) = self.pending.take() else {
            return;
        };
        let (Some(ch), Some(st)) = (
            self.snap.table.channels.get(p.channel),
            self.snap.states.get(p.channel),
        ) else {
            return;
        };
        record_visit(
            &self.snap.table.config.routing,
            ch,
            st,
            self.model,
            &p.outcome,
            p.elapsed,
            p.probe,
        );
    }
}

impl Drop for Visits<'_> {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Is the channel down for `model`: disabled, or its breaker refuses (R7.3)?
fn down(ch: &Channel, st: &ChannelState, model: &str, now: Instant) -> bool {
    st.is_disabled() || !st.breakers.would_admit(&limits(ch), scope(ch, model), now)
}

/// `/v1/models`: leave out models whose every channel is down — unless that would leave out
/// every model (seed 004: when everything is down, list everything).
pub fn hide_down_models(snap: &super::Snapshot, groups: &[String], names: &mut Vec<&String>) {
    let now = Instant::now();
    let up = |m: &str| {
        groups
            .iter()
            .filter_map(|g| snap.table.routes.get(&(g.clone(), m.to_string())))
            .flat_map(|r| r.tiers.iter())
            .flat_map(|t| t.candidates.iter())
            .any(|c| {
                match (
                    snap.table.channels.get(c.channel),
                    snap.states.get(c.channel),
                ) {
                    (Some(ch), Some(st)) => !down(ch, st, m, now),
                    _ => false,
                }
            })
    };
    let kept: Vec<&String> = names.iter().copied().filter(|m| up(m)).collect();
    if !kept.is_empty() {
        *names = kept;
    }
}

/// The health part of a channel's admin view (R6.5, R7.2, R7.3).
pub fn view(ch: &Channel, st: &ChannelState) -> serde_json::Value {
    let now = Instant::now();
    let lim = limits(ch);
    let cb = st.breakers.provider();
    let state = if lim.failure_threshold == 0 {
        State::Closed
    } else {
        cb.state(&lim, now)
    };
    let models = st.breakers.models_not_closed(&lim, now);
    let counts = st.health.counts(now);
    let status = if st.is_disabled() || state == State::Open {
        "offline"
    } else if counts.degraded() || state == State::HalfOpen || !models.is_empty() {
        "degraded"
    } else {
        "ok"
    };
    let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
    serde_json::json!({
        "status": status,
        "breaker": {
            "enabled": lim.failure_threshold > 0,
            "state": state.name(),
            "consecutive_failures": cb.consecutive_failures(),
            "open_remaining_ms": ms(cb.open_remaining(&lim, now)),
            "models": models.iter().map(|(m, s)| serde_json::json!({"model": m, "state": s.name()})).collect::<Vec<_>>(),
        },
        "cooldown_remaining_ms": ms(st.cooldown.remaining(&ch.resilience.cooldown, now)),
        "window": {"seconds": super::health::WINDOW.as_secs(), "ok": counts.ok, "errors": counts.errors},
        "discovery": st.health.discovery(),
    })
}

/// Statuses the caller caused: never a breaker failure (R6.2).
const CALLER_FAULT: &[u16] = &[400, 404, 413, 422];

/// R6.2: how an attempt's outcome counts for the channel breaker. `elapsed` is the time to
/// response headers (non-stream) or to the first data event (streams).
pub fn verdict(
    outcome: &Outcome,
    mapping: &std::collections::BTreeMap<u16, u16>,
    elapsed: Duration,
    cfg: &BreakerCfg,
) -> Verdict {
    let slow = !cfg.slow_call_threshold.is_zero() && elapsed > cfg.slow_call_threshold;
    match outcome {
        Outcome::Success => {
            if slow {
                Verdict::Failure
            } else {
                Verdict::Success
            }
        }
        Outcome::Status { code, .. } => {
            let code = map_status(*code, mapping);
            if (200..300).contains(&code) {
                if slow {
                    Verdict::Failure
                } else {
                    Verdict::Success
                }
            } else if CALLER_FAULT.contains(&code) {
                Verdict::Neutral
            } else if cfg.failure_on.contains(code) {
                Verdict::Failure
            } else {
                Verdict::Neutral
            }
        }
        Outcome::Transport(_) => Verdict::Failure,
        Outcome::ChannelError(_) => Verdict::Failure,
        Outcome::ClientGone
        | Outcome::LocalAdapter(_)
        | Outcome::SkipRetry(_)
        | Outcome::DeadlineExceeded => Verdict::Neutral,
    }
}
