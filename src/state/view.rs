//! Read-only health views: `/v1/models` filtering and the health part of a channel's admin
//! view (R6.5, R7.2, R7.3).

use std::time::Duration;

use tokio::time::Instant;

use super::breaker::State;
use super::channel::ChannelState;
use super::outcome::{limits, scope};
use crate::config::model::Channel;
use crate::routing::pair;

/// Is the channel down for upstream `model`: disabled, its breaker refuses (R7.3), or the
/// model is marked not found?
fn down(ch: &Channel, st: &ChannelState, model: &str, now: Instant) -> bool {
    st.is_disabled()
        || !st.breakers.would_admit(&limits(ch), scope(ch, model), now)
        || st.missing_models.is_missing(model, now)
}

/// `/v1/models`: leave out models whose every target is down — unless that would leave out
/// every model (R1.1: when everything is down, list everything).
pub fn hide_down_models(
    snap: &super::Snapshot,
    groups: &[std::sync::Arc<str>],
    names: &mut Vec<&String>,
) {
    let now = Instant::now();
    let up = |m: &str| {
        groups
            .iter()
            .filter_map(|g| snap.table.routes.get(pair::key(&(&**g, m))))
            .flat_map(|r| r.tiers.iter())
            .flat_map(|t| t.candidates.iter())
            .any(|c| {
                match (
                    snap.table.channels.get(c.channel),
                    snap.states.get(c.channel),
                ) {
                    (Some(ch), Some(st)) => !down(ch, st, &c.upstream_model, now),
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
    let missing = st.missing_models.list(now);
    let counts = st.health.counts(now);
    let status = if st.is_disabled() || state == State::Open {
        "offline"
    } else if counts.degraded()
        || state == State::HalfOpen
        || !models.is_empty()
        || !missing.is_empty()
    {
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
        "models_not_found": missing.iter().map(|(m, d)| serde_json::json!({"model": m, "remaining_ms": d.as_millis() as u64})).collect::<Vec<_>>(),
        "window": {"seconds": super::health::WINDOW.as_secs(), "ok": counts.ok, "errors": counts.errors},
        "discovery": st.health.discovery(),
    })
}
