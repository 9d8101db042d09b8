//! The attempt loop's hooks into channel health: plan-time availability of a (channel,
//! upstream model) target, attempt admission (the half-open probe is taken here) and
//! recording outcomes into the breaker, cooldown, health window, "model not found" marks
//! and auto-disable rules (R6, R7). Every rule sees the status after the channel's
//! `status_code_mapping`.
//!
//! `model` is always the *upstream* model of the candidate (from the config; "" on
//! pass-through paths), never the client's string: a virtual model's targets on one
//! channel are separate targets, each with its own model breaker (R6.1).

use std::time::Duration;

use tokio::time::Instant;

use super::autodisable::{self, Applied};
use super::breaker::{Admission, Limits, Scope, State, Transition, Verdict};
use super::channel::ChannelState;
use super::cooldown;
use super::keys::KeyFp;
use crate::config::model::Breaker as BreakerCfg;
use crate::config::model::{AutoDisable, BreakerScope, Channel};
use crate::routing::outcome::{Outcome, OutcomeFacts};
use crate::store::Store;

pub use super::view::{hide_down_models, view};
pub use super::visits::Visits;

/// The breaker a call to `ch` for upstream `model` uses: the provider breaker, or the
/// model's breaker under `scope: model` (R6.1). An empty model uses the provider breaker.
pub fn scope<'a>(ch: &Channel, model: &'a str) -> Scope<'a> {
    match ch.resilience.circuit_breaker.scope {
        BreakerScope::Model if !model.is_empty() => Some(model),
        _ => None,
    }
}

pub(crate) fn limits(ch: &Channel) -> Limits {
    Limits::of(&ch.resilience.circuit_breaker)
}

/// Plan-time availability of (channel, upstream model): not disabled, breaker would admit,
/// not cooled down, not marked "model not found". Non-mutating.
pub fn available(ch: &Channel, st: &ChannelState, model: &str, now: Instant) -> bool {
    !st.is_disabled()
        && st.breakers.would_admit(&limits(ch), scope(ch, model), now)
        && !st.cooldown.is_cooled_down(&ch.resilience.cooldown, now)
        && !st.missing_models.is_missing(model, now)
}

/// Is the channel cooling down (R6.4)? For affinity: a cooled-down channel gets no new
/// bindings and an existing binding to it is re-evaluated.
pub fn is_cooled_down(ch: &Channel, st: &ChannelState) -> bool {
    st.cooldown
        .is_cooled_down(&ch.resilience.cooldown, crate::clock::instant())
}

/// Admission for one attempt (a same-target retry reuses the admission of its first try).
pub fn admit(ch: &Channel, st: &ChannelState, model: &str) -> Admission {
    let (a, t) = st
        .breakers
        .acquire(&limits(ch), scope(ch, model), crate::clock::instant());
    if let Some(t) = t {
        report(&ch.name, t, t.to);
    }
    a
}

fn report(channel: &str, transition: Transition, now: State) {
    metrics::gauge!(crate::telemetry::BREAKER_STATE, "channel" => channel.to_string())
        .set(now.gauge());
    metrics::counter!(crate::telemetry::BREAKER_TRANSITIONS, "channel" => channel.to_string(), "to" => transition.to.name())
        .increment(1);
    tracing::info!(
        channel,
        from = transition.from.name(),
        to = transition.to.name(),
        "circuit breaker"
    );
}

/// One attempt's target: the channel, its key fingerprints, the key used and the upstream
/// model.
pub struct Target<'a> {
    pub ch: &'a Channel,
    pub st: &'a ChannelState,
    pub fps: &'a [KeyFp],
    pub key: usize,
    pub model: &'a str,
}

/// Record one attempt right away: the health window, a "model not found" mark and the
/// auto-disable rules (R7.1, R7.3, B-model-not-found), on the facts of its outcome (mapped status).
pub fn record_attempt(
    store: &Store,
    rules: &AutoDisable,
    target: &Target,
    facts: &OutcomeFacts,
) -> Applied {
    let (ch, st) = (target.ch, target.st);
    let now = crate::clock::instant();
    if let Some(err) = super::health::is_error(facts) {
        st.health.record(err, now);
    }
    if !target.model.is_empty() && super::models::is_model_not_found(&facts.outcome) {
        let missing_for = ch.resilience.cooldown.duration;
        st.missing_models.mark(target.model, now + missing_for, now);
        st.sync.emit(|| super::sync::Change::ModelMissing {
            channel: ch.name.clone(),
            model: target.model.to_string(),
            duration: missing_for,
        });
        tracing::info!(channel = %ch.name, model = target.model, duration = ?missing_for, "upstream does not serve the model");
    }
    match autodisable::should_disable(&facts.outcome, rules) {
        Some(reason) => autodisable::apply(
            store,
            ch,
            st,
            target.fps,
            target.key,
            &reason,
            crate::store::now_ms(),
        ),
        None => Applied::Nothing,
    }
}

/// Record the end of one target visit (a whole same-target retry sequence counts once, R6.2)
/// into the breaker and the cooldown. `elapsed` is the last attempt's time to headers / to
/// the first stream event.
pub fn record_visit(
    ch: &Channel,
    st: &ChannelState,
    model: &str,
    facts: &OutcomeFacts,
    elapsed: Duration,
    probe: bool,
) {
    let now = crate::clock::instant();
    let cb = &ch.resilience.circuit_breaker;
    let visit_verdict = verdict(facts, elapsed, cb);
    let (transition, state) =
        st.breakers
            .record(&limits(ch), scope(ch, model), visit_verdict, probe, now);
    if let Some(transition) = transition {
        report(&ch.name, transition, state);
    } else if visit_verdict != Verdict::Neutral && cb.enabled && cb.failure_threshold > 0 {
        // Model scope: the channel gauge follows the breaker of the latest finished call.
        st.metrics.breaker_state.set(state.gauge());
    }
    if st
        .cooldown
        .record(&ch.resilience.cooldown, cooldown::verdict(facts), now)
    {
        tracing::info!(channel = %ch.name, duration = ?ch.resilience.cooldown.duration, "channel cooling down");
        st.sync.emit(|| super::sync::Change::CooledDown {
            channel: ch.name.clone(),
            duration: ch.resilience.cooldown.duration,
        });
    }
}

/// A half-open probe whose attempt never finished (the request was cancelled) frees its
/// slot at once, counting neither way.
pub fn release_probe(ch: &Channel, st: &ChannelState, model: &str) {
    st.breakers.record(
        &limits(ch),
        scope(ch, model),
        Verdict::Neutral,
        true,
        crate::clock::instant(),
    );
}

/// R19.2 (`resilience.active_probe`): the breakers of `ch` that want an active probe now —
/// `None` for the channel itself (its provider breaker open or half-open, or its cooldown
/// running), `Some(model)` for each model breaker that is not closed.
pub fn wanting_probe(ch: &Channel, st: &ChannelState, now: Instant) -> Vec<Option<String>> {
    let lim = limits(ch);
    let mut scopes = Vec::new();
    if st.breakers.provider().state(&lim, now) != State::Closed
        || st.cooldown.is_cooled_down(&ch.resilience.cooldown, now)
    {
        scopes.push(None);
    }
    scopes.extend(
        st.breakers
            .models_not_closed(&lim, now)
            .into_iter()
            .map(|(m, _)| Some(m)),
    );
    scopes
}

/// R19.2: an active probe of `scope` succeeded: its breaker closes (and, for the channel,
/// its cooldown ends) without waiting for client traffic.
pub fn probe_recovered(ch: &Channel, st: &ChannelState, scope: Option<&str>) {
    if let Some(t) = st.breakers.close(scope) {
        report(&ch.name, t, t.to);
    }
    if scope.is_none()
        && st
            .cooldown
            .is_cooled_down(&ch.resilience.cooldown, crate::clock::instant())
    {
        st.cooldown.reset();
        tracing::info!(channel = %ch.name, "cooldown ended by an active probe");
    }
}

/// Operator enable (or a probe re-enable): clear breakers, cooldown, "model not found" marks
/// and the health window — on every replica when state is shared.
pub fn reset(st: &ChannelState) {
    reset_quiet(st);
    st.sync.emit(|| super::sync::Change::Reset {
        channel: st.name.to_string(),
        at_ms: crate::store::now_ms(),
    });
}

/// [`reset`] without the announcement (another replica's reset).
pub fn reset_quiet(st: &ChannelState) {
    st.breakers.reset();
    st.cooldown.reset();
    st.missing_models.clear();
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

/// R6.2: how an attempt counts for the channel breaker. `elapsed` is the time to response
/// headers (non-stream) or to the first data event (streams). A caller's fault never counts;
/// a status counts when it is in `failure_on` (after mapping); transport and `channel:*`
/// errors count; a call slower than `slow_call_threshold` fails even when it succeeded.
pub fn verdict(facts: &OutcomeFacts, elapsed: Duration, cfg: &BreakerCfg) -> Verdict {
    let slow = !cfg.slow_call_threshold.is_zero() && elapsed > cfg.slow_call_threshold;
    if facts.success {
        return if slow {
            Verdict::Failure
        } else {
            Verdict::Success
        };
    }
    if facts.caller_fault {
        return Verdict::Neutral;
    }
    let failure = match facts.status {
        Some(code) => cfg.failure_on.contains(code),
        None => facts.upstream_fault,
    };
    if failure {
        Verdict::Failure
    } else {
        Verdict::Neutral
    }
}
