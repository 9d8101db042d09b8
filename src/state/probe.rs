//! Background probes (R7.2, R7.3): every `auto_disable.probe_interval` list each channel's
//! models (`GET {base_url}/models` with its first enabled key through the upstream client)
//! — failing channels are rechecked four times as often — and, with `auto_enable`:
//!
//! - re-test each auto-disabled *key* of the channel with that key, and lift the key when
//!   the upstream answers 2xx (a channel with dead and live keys is not "failing", so its
//!   dead keys would otherwise stay disabled for good);
//! - re-enable an auto-disabled channel when a probe with one of its keys answers 2xx (the
//!   key is lifted with it).
//!
//! Every lift is persisted durably. Bounded: one probe task per channel in flight, each
//! request within 10 s, at most [`KEY_PROBES_IN_FLIGHT`] keys of a channel at once; the
//! first round runs one interval after start. Operator disables are never lifted here.

use crate::lock::lock;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::future::Future;

use futures_util::stream::{self, StreamExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::breaker::{Limits, State};
use super::channel::ChannelState;
use super::health::Discovery;
use super::keys::KeyFp;
use super::Snapshot;
use crate::config::model::Channel;
use crate::store::{StateKey, Store};

/// A probe gives up after this long.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Disabled keys of one channel re-tested at once.
pub const KEY_PROBES_IN_FLIGHT: usize = 4;
const MIN_TICK: Duration = Duration::from_millis(50);

/// What the probe needs from the running gateway: the live snapshot, the store and one
/// model listing upstream. The gateway's context implements it; this module never sees it.
pub trait Host: Send + Sync + 'static {
    /// The snapshot in force now.
    fn snapshot(&self) -> Arc<Snapshot>;
    fn store(&self) -> &Store;
    /// `GET {base_url}/models` on `ch` with key `key`, within `timeout`: the status, or
    /// `None` on a transport failure or timeout.
    fn list_models(
        &self,
        ch: &Channel,
        key: usize,
        timeout: Duration,
    ) -> impl Future<Output = Option<u16>> + Send;
}

/// Run until `shutdown` turns true.
pub async fn run<H: Host>(gw: Arc<H>, mut shutdown: watch::Receiver<bool>) {
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
            let fps = snap
                .key_fps
                .get(id)
                .cloned()
                .unwrap_or_else(|| Arc::from([]));
            let (gw, st, ch, busy) = (gw.clone(), st.clone(), ch.clone(), busy.clone());
            tokio::spawn(async move {
                probe_one(gw.as_ref(), &ch, &st, &fps).await;
                lock(&busy).remove(&ch.name);
            });
        }
    }
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
fn probe_key(st: &ChannelState, fps: &[KeyFp]) -> usize {
    fps.iter().position(|f| !st.key_disabled(f)).unwrap_or(0)
}

/// Keys of the channel that are auto-disabled, other than `except`.
fn auto_disabled_keys(st: &ChannelState, fps: &[KeyFp], except: usize) -> Vec<usize> {
    (0..fps.len())
        .filter(|i| *i != except)
        .filter(|i| st.key_disabled_why(&fps[*i]).is_some_and(|d| d.auto))
        .collect()
}

fn count(channel: &str, result: &'static str) {
    metrics::counter!(crate::telemetry::PROBES, "channel" => channel.to_string(), "result" => result)
        .increment(1);
}

fn is_ok(status: Option<u16>) -> bool {
    status.is_some_and(|s| (200..300).contains(&s))
}

async fn probe_one<H: Host>(gw: &H, ch: &Channel, st: &ChannelState, fps: &[KeyFp]) {
    let key = probe_key(st, fps);
    let status = gw.list_models(ch, key, PROBE_TIMEOUT).await;
    let ok = is_ok(status);
    count(&ch.name, if ok { "ok" } else { "failed" });
    st.health.set_discovery(Discovery {
        ok,
        status,
        at_ms: crate::store::now_ms(),
        at: Instant::now(),
    });
    let auto_enable = gw.snapshot().table.config.auto_disable.auto_enable;
    if !auto_enable || st.disabled().is_some_and(|d| !d.auto) {
        return;
    }
    if ok {
        lift_key(gw, ch, st, fps, key);
    }
    // R7.2: every auto-disabled key is re-tested with itself, not only the whole channel.
    let others = auto_disabled_keys(st, fps, key);
    let lifted: Vec<usize> = stream::iter(others)
        .map(|i| async move {
            let ok = is_ok(gw.list_models(ch, i, PROBE_TIMEOUT).await);
            count(&ch.name, if ok { "ok" } else { "failed" });
            ok.then_some(i)
        })
        .buffer_unordered(KEY_PROBES_IN_FLIGHT)
        .filter_map(|r| async move { r })
        .collect()
        .await;
    for i in &lifted {
        lift_key(gw, ch, st, fps, *i);
    }
    let some_key_on = fps.len() <= 1 || fps.iter().any(|f| !st.key_disabled(f));
    if (ok || !lifted.is_empty()) && some_key_on {
        reenable(gw, ch, st, key);
    }
}

/// Lift the auto-disable of key `key` after a successful probe with it (R7.2).
fn lift_key<H: Host>(gw: &H, ch: &Channel, st: &ChannelState, fps: &[KeyFp], key: usize) {
    let Some(fp) = fps.get(key) else {
        return;
    };
    if !st.key_disabled_why(fp).is_some_and(|d| d.auto) {
        return;
    }
    st.enable_key(fp);
    st.save(gw.store(), StateKey::Key(fp.hex()), None);
    count(&ch.name, "key_reenabled");
    tracing::warn!(channel = %ch.name, key_index = key, key = %fp, by = "probe",
        reason = "GET /models answered 2xx", "key re-enabled");
}

/// Lift an auto-disable of the channel after a successful probe with key `key` (R7.2).
fn reenable<H: Host>(gw: &H, ch: &Channel, st: &ChannelState, key: usize) {
    let Some(d) = st.disabled() else {
        return;
    };
    if !d.auto {
        return;
    }
    st.set_disabled(None);
    super::outcome::reset(st);
    st.save(gw.store(), StateKey::Channel, None);
    metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => ch.name.clone()).set(0.0);
    count(&ch.name, "reenabled");
    tracing::warn!(channel = %ch.name, key_index = key, by = "probe", was = %d.reason,
        reason = "GET /models answered 2xx", "channel re-enabled");
}
