//! Active probes (R19.2, `resilience.active_probe`): while a channel's breaker (or one of
//! its model breakers) is open or half-open, or the channel cools down, the gateway sends it
//! a minimal real request every `interval` — a one-token non-stream chat (`max_tokens: 1`;
//! Anthropic: a one-token `/v1/messages`; Gemini: the same chat translated into
//! `generateContent`) with the channel's first enabled key — and closes that breaker (ends
//! the cooldown) when it answers 2xx. Recovery then does not wait for client traffic.
//!
//! A probe belongs to no client: it is never billed, never in the request log, and touches
//! no rate limit; it is counted in `switchyard_probe_requests_total{channel,outcome}`. A
//! failed probe changes nothing (the breaker's own timeout and half-open probe still run).
//! Bounded: one probe per (channel, breaker) in flight, each within [`PROBE_TIMEOUT`]; the
//! first one `interval` after the breaker was first seen open, then one per `interval`.
//! With shared state one replica per interval sends each breaker's probe (the first to take
//! the turn in Redis, `Shared::prober_turn`; while Redis does not answer, each replica probes
//! on its own), and the first success closes the breaker on every replica (`BreakerClosed`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::model::{Channel, ChannelKind};
use crate::lock::lock;
use crate::relay::gateway::Gateway;
use crate::routing::family::PathFamily;
use crate::state::channel::ChannelState;
use crate::state::outcome::{probe_recovered, wanting_probe};
use crate::state::Snapshot;
use crate::telemetry;
use crate::upstream::provider::Target;
use crate::upstream::{build, status_within, Outgoing};

/// A probe gives up after this long.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the prober looks for breakers that want a probe.
const TICK: Duration = Duration::from_millis(100);

/// (channel name, breaker: `None` = the channel's own).
type Wanted = (String, Option<String>);

/// When each wanted probe is next due: the first one `interval` after the breaker was first
/// seen wanting it, then one per `interval`; one in flight per breaker. Forgets a breaker
/// once it no longer wants a probe (so a later opening waits a whole interval again).
#[derive(Debug, Default)]
struct Schedule {
    due: HashMap<Wanted, Instant>,
    busy: Arc<Mutex<HashSet<Wanted>>>,
    seen: HashSet<Wanted>,
}

impl Schedule {
    /// `w` wants a probe every `interval` at `now`: true when one should go out now (it is
    /// then marked in flight until [`Schedule::done`]).
    fn take(&mut self, w: &Wanted, interval: Duration, now: Instant) -> bool {
        self.seen.insert(w.clone());
        let at = *self.due.entry(w.clone()).or_insert(now + interval);
        if at > now || !lock(&self.busy).insert(w.clone()) {
            return false;
        }
        self.due.insert(w.clone(), now + interval);
        true
    }

    /// The end of a round: breakers not seen wanting a probe are forgotten.
    fn round_done(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.due.retain(|w, _| seen.contains(w));
    }

    /// A probe of `w` finished.
    fn done(busy: &Mutex<HashSet<Wanted>>, w: &Wanted) {
        lock(busy).remove(w);
    }
}

/// Run until `shutdown` turns true.
pub async fn run(gw: Arc<Gateway>, mut shutdown: watch::Receiver<bool>) {
    let mut schedule = Schedule::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let snap = gw.snapshot();
        let now = Instant::now();
        for (id, ch) in snap.table.channels.iter().enumerate() {
            let probe = &ch.resilience.active_probe;
            let Some(st) = snap.states.get(id) else {
                continue;
            };
            if !probe.enabled || !ch.enabled || st.is_disabled() {
                continue;
            }
            for scope in wanting_probe(ch, st, now) {
                let wanted = (ch.name.clone(), scope);
                if !schedule.take(&wanted, probe.interval, now) {
                    continue;
                }
                let (gw, snap, busy) = (gw.clone(), snap.clone(), schedule.busy.clone());
                let interval = probe.interval;
                tokio::spawn(async move {
                    if our_turn(&gw, &wanted, interval).await {
                        probe_one(&gw, &snap, id, wanted.1.as_deref()).await;
                    }
                    Schedule::done(&busy, &wanted);
                });
            }
        }
        schedule.round_done();
    }
}

/// With shared state, one replica per interval sends the probe of a breaker (the first to
/// ask takes the turn); alone, this replica always does.
async fn our_turn(gw: &Gateway, w: &Wanted, interval: Duration) -> bool {
    match gw.shared.get() {
        Some(shared) => shared.prober_turn(&w.0, w.1.as_deref(), interval).await,
        None => true,
    }
}

/// One probe of channel `id`'s breaker `scope`; on success the breaker closes.
async fn probe_one(gw: &Gateway, snap: &Snapshot, id: usize, scope: Option<&str>) {
    let (Some(ch), Some(st)) = (snap.table.channels.get(id), snap.states.get(id)) else {
        return;
    };
    let model = match scope {
        Some(m) => m.to_string(),
        None => probe_model(ch),
    };
    let key = first_enabled_key(snap, id, st);
    let ok = match send(gw, ch, key, &model).await {
        Some(status) => (200..300).contains(&status),
        None => false,
    };
    let outcome = if ok { "ok" } else { "failed" };
    metrics::counter!(telemetry::PROBE_REQUESTS, "channel" => ch.name.clone(), "outcome" => outcome)
        .increment(1);
    tracing::debug!(channel = %ch.name, model, outcome, "active probe");
    if ok {
        probe_recovered(ch, st, scope);
    }
}

/// `active_probe.model`, else the channel's first model as its upstream knows it.
fn probe_model(ch: &Channel) -> String {
    if !ch.resilience.active_probe.model.is_empty() {
        return ch.resilience.active_probe.model.clone();
    }
    let first = ch.models.first().or_else(|| ch.model_mapping.keys().next());
    first
        .map(|m| ch.model_mapping.get(m).unwrap_or(m).clone())
        .unwrap_or_default()
}

fn first_enabled_key(snap: &Snapshot, id: usize, st: &ChannelState) -> usize {
    snap.key_fps
        .get(id)
        .and_then(|fps| fps.iter().position(|f| !st.key_disabled(f)))
        .unwrap_or(0)
}

/// The cheapest documented call of the channel's kind, for `model`: (path, body).
fn minimal_request(ch: &Channel, model: &str) -> Option<(&'static str, Bytes)> {
    let msgs = serde_json::json!([{"role": "user", "content": "ping"}]);
    let chat =
        serde_json::json!({"model": model, "max_tokens": 1, "stream": false, "messages": msgs});
    let chat = Bytes::from(serde_json::to_vec(&chat).ok()?);
    match ch.kind {
        ChannelKind::OpenAi | ChannelKind::Azure => Some((
            "/v1/chat/completions",
            crate::relay::attempt::compat::native_body(PathFamily::Chat, ch, model, chat),
        )),
        ChannelKind::Anthropic => Some(("/v1/messages", chat)),
        ChannelKind::Gemini => {
            let translator = crate::relay::attempt::translated::of(PathFamily::Chat, ch.kind)?;
            let prepared = translator.request(&chat, model, ch).ok()?;
            Some((translator.upstream_path(), prepared.body))
        }
    }
}

/// Send the probe: its status, or `None` on a transport failure or timeout.
async fn send(gw: &Gateway, ch: &Channel, key: usize, model: &str) -> Option<u16> {
    let (path, body) = minimal_request(ch, model)?;
    let rid = HeaderValue::from_static("active-probe");
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let req = build(Outgoing {
        channel: ch,
        key: ch.keys.get(key),
        method: Method::POST,
        path_and_query: path,
        target: Target {
            model,
            stream: false,
            api_version: "",
        },
        client_headers: &headers,
        body: body.into(),
        idempotency_key: None,
        traceparent: None,
        request_id: &rid,
    })
    .ok()?;
    status_within(&gw.upstream, ch, req, PROBE_TIMEOUT).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_probe_an_interval_after_first_seen_then_every_interval_one_at_a_time() {
        let mut s = Schedule::default();
        let w: Wanted = ("a".into(), None);
        let every = Duration::from_secs(10);
        let start = Instant::now();
        assert!(!s.take(&w, every, Instant::now()), "not at once");
        s.round_done();
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(!s.take(&w, every, Instant::now()));
        s.round_done();
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            s.take(&w, every, Instant::now()),
            "due at {:?}",
            start.elapsed()
        );
        s.round_done();
        // Still in flight at the next due time: no second probe.
        tokio::time::advance(every).await;
        assert!(!s.take(&w, every, Instant::now()));
        Schedule::done(&s.busy, &w);
        assert!(s.take(&w, every, Instant::now()));
        Schedule::done(&s.busy, &w);
        s.round_done();
        // Healthy for a round: forgotten; seen again, it waits a whole interval.
        s.round_done();
        tokio::time::advance(every * 3).await;
        assert!(!s.take(&w, every, Instant::now()));
        // Breakers are scheduled apart.
        let m: Wanted = ("a".into(), Some("model".into()));
        assert!(!s.take(&m, every, Instant::now()));
    }
}
