//! Background probes (R7.2, R7.3): every `auto_disable.probe_interval` list each channel's
//! models (`GET {base_url}/models` with its key through the upstream client) — failing
//! channels are rechecked four times as often — and, with `auto_enable`, re-enable an
//! auto-disabled channel whose probe answers 2xx (persisted).
//!
//! Bounded: one probe per channel in flight, each within 10 s; the first round runs one
//! interval after start. Operator disables are never lifted here.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use tokio::sync::watch;
use tokio::time::Instant;

use super::breaker::{Limits, State};
use super::channel::ChannelState;
use super::health::Discovery;
use crate::config::model::Channel;
use crate::proxy::gateway::Gateway;
use crate::proxy::upstream::{self, Outgoing};
use crate::store::WriteOp;

/// A probe gives up after this long.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
const MIN_TICK: Duration = Duration::from_millis(50);

/// Run until `shutdown` turns true.
pub async fn run(gw: Arc<Gateway>, mut shutdown: watch::Receiver<bool>) {
    let started = Instant::now();
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    loop {
        let interval = gw.snapshot().table.config.auto_disable.probe_interval;
        let tick = (interval / 4).max(MIN_TICK);
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let snap = gw.snapshot();
        let now = Instant::now();
        for (id, ch) in snap.table.channels.iter().enumerate() {
            let Some(st) = snap.states.get(id) else {
                continue;
            };
            if !ch.enabled || !due(ch, st, interval, started, now) {
                continue;
            }
            if !lock(&busy).insert(ch.name.clone()) {
                continue;
            }
            let (gw, st, ch, busy) = (gw.clone(), st.clone(), ch.clone(), busy.clone());
            tokio::spawn(async move {
                probe_one(&gw, &ch, &st).await;
                lock(&busy).remove(&ch.name);
            });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Failing (not disabled) channels are rechecked at a quarter of the interval.
fn due(
    ch: &Channel,
    st: &ChannelState,
    interval: Duration,
    started: Instant,
    now: Instant,
) -> bool {
    let last = st.health.discovery();
    let since = last.as_ref().map_or(started, |d| d.at);
    let lim = Limits::of(&ch.resilience.circuit_breaker);
    let failing = !st.is_disabled()
        && (last.as_ref().is_some_and(|d| !d.ok)
            || st.health.counts(now).degraded()
            || st.breakers.provider().state(&lim, now) != State::Closed);
    let every = if failing { interval / 4 } else { interval };
    now.saturating_duration_since(since) >= every
}

/// The key a probe uses: the first enabled key, else (every key disabled) the first key.
fn probe_key(ch: &Channel, st: &ChannelState) -> usize {
    (0..ch.keys.len())
        .find(|i| !st.key_disabled(*i))
        .unwrap_or(0)
}

/// `GET {base}/models`: Some(status), or None on a transport failure / timeout.
pub async fn list_models(gw: &Gateway, ch: &Channel, key: usize) -> Option<u16> {
    let rid = HeaderValue::from_static("probe");
    let req = upstream::build(Outgoing {
        channel: ch,
        key: ch.keys.get(key),
        method: Method::GET,
        path_and_query: "/v1/models",
        client_headers: &HeaderMap::new(),
        body: Bytes::new(),
        idempotency_key: None,
        request_id: &rid,
    })
    .ok()?;
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let resp = tokio::time::timeout_at(deadline, gw.upstream.send(req))
        .await
        .ok()?
        .ok()?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let _ = crate::proxy::relay::read_error(&mut body, deadline).await;
    Some(status)
}

async fn probe_one(gw: &Gateway, ch: &Channel, st: &ChannelState) {
    let key = probe_key(ch, st);
    let status = list_models(gw, ch, key).await;
    let ok = status.is_some_and(|s| (200..300).contains(&s));
    metrics::counter!(crate::telemetry::PROBES, "channel" => ch.name.clone(), "result" => if ok { "ok" } else { "failed" })
        .increment(1);
    st.health.set_discovery(Discovery {
        ok,
        status,
        at_ms: crate::proxy::finish::now_ms(),
        at: Instant::now(),
    });
    let auto_enable = gw.snapshot().table.config.auto_disable.auto_enable;
    if ok && auto_enable {
        reenable(gw, ch, st, key);
    }
}

/// Lift an auto-disable after a successful probe with key `key` (R7.2).
fn reenable(gw: &Gateway, ch: &Channel, st: &ChannelState, key: usize) {
    let persist = |key_index: Option<u32>| {
        gw.store
            .try_send(WriteOp::ChannelState(crate::store::ChannelState {
                channel: ch.name.clone(),
                key_index,
                disabled: false,
                reason: String::new(),
                ts_ms: crate::proxy::finish::now_ms(),
                auto: true,
            }));
    };
    let Some(d) = st.disabled() else {
        return;
    };
    if !d.auto {
        return;
    }
    if st.key_disabled(key) {
        st.enable_key(key);
        persist(Some(key as u32));
    }
    st.set_disabled(None);
    super::outcome::reset(st);
    persist(None);
    metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => ch.name.clone()).set(0.0);
    metrics::counter!(crate::telemetry::PROBES, "channel" => ch.name.clone(), "result" => "reenabled").increment(1);
    tracing::warn!(channel = %ch.name, key_index = key, by = "probe", was = %d.reason,
        reason = "GET /models answered 2xx", "channel re-enabled");
}
