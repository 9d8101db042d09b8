//! Upstream keys and their limits on the request path (R15.3): which keys the plan walks
//! (enabled, and not held back — cooling after a rate-limit answer, or out of their
//! `channels.*.limits` budget), the hold an attempt takes on its key, the cool-down learned
//! from an upstream's 429, and `routing.balance: capacity`'s remaining fractions.
//!
//! A held-back key is treated like a cooling key: the channel's other keys are walked
//! instead; a channel whose every key is held back is unavailable for the plan, so other
//! channels go first. When nothing else is left (every candidate unavailable), the plan
//! walks the held-back keys anyway, and an attempt on a key without room waits for it — at
//! most [`MAX_KEY_WAIT`] and never past the request's deadline — or, when that is not
//! enough, fails over without reaching the upstream (`channel:key_rate_limited`).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::config::model::Channel;
use crate::limits::{upstream, Admission, Room};
use crate::relay::gateway::Gateway;
use crate::routing::table::ChannelId;
use crate::shared::limits::LimitGrant;
use crate::state::autodisable::KeyMap;
use crate::state::Snapshot;
use crate::telemetry;

/// The longest an attempt waits for its key's limits to have room.
pub const MAX_KEY_WAIT: Duration = Duration::from_secs(5);

/// The keys the plan walks for each channel: enabled, then not held back.
#[derive(Debug, Default)]
pub struct PlanKeys {
    base: KeyMap,
    /// Channels with some key held back (and some not): the real indexes of the others.
    ready: HashMap<ChannelId, Vec<usize>>,
    /// Channels whose every key is held back.
    pub held: HashSet<ChannelId>,
}

impl PlanKeys {
    /// Key count the plan walks for channel `id` given its configured count.
    pub fn count(&self, id: ChannelId, configured: usize) -> usize {
        match self.ready.get(&id) {
            Some(v) => v.len(),
            None => self.base.count(id, configured),
        }
    }

    /// The real key index of the plan's key position `pos`.
    pub fn key(&self, id: ChannelId, pos: usize) -> usize {
        match self.ready.get(&id) {
            Some(v) => v.get(pos).copied().unwrap_or(pos),
            None => self.base.key(id, pos),
        }
    }
}

/// The stored fingerprint of key `index` of channel `id` (what limits are keyed by).
pub fn key_fp(snap: &Snapshot, id: ChannelId, index: usize) -> Option<String> {
    Some(snap.key_fps.get(id)?.get(index)?.hex())
}

/// The enabled keys of `channels`, with the held-back ones set aside (R15.3). A request
/// reserving `tokens` pays nothing here unless a channel has limits or some key cools.
pub fn plan_keys(
    gw: &Gateway,
    snap: &Snapshot,
    channels: impl IntoIterator<Item = ChannelId> + Clone,
    tokens: u64,
) -> PlanKeys {
    let base = KeyMap::new(channels.clone(), snap);
    let mut keys = PlanKeys {
        base,
        ..PlanKeys::default()
    };
    let cooling = gw.key_cooldowns.any();
    let now = crate::clock::instant();
    for id in channels {
        let Some(ch) = snap.table.channels.get(id) else {
            continue;
        };
        if (!cooling && ch.limits.is_unlimited()) || keys.ready.contains_key(&id) {
            continue;
        }
        let n = keys.base.count(id, ch.keys.len());
        let ready: Vec<usize> = (0..n)
            .map(|p| keys.base.key(id, p))
            .filter(|&k| !held_back(gw, snap, ch, id, k, tokens, now))
            .collect();
        if ready.is_empty() {
            keys.held.insert(id);
        } else if ready.len() < n {
            keys.ready.insert(id, ready);
        }
    }
    keys
}

/// Key `k` of `ch` is cooling, or its limits have no room for `tokens` now.
fn held_back(
    gw: &Gateway,
    snap: &Snapshot,
    ch: &Channel,
    id: ChannelId,
    k: usize,
    tokens: u64,
    now: Instant,
) -> bool {
    let Some(fp) = key_fp(snap, id, k) else {
        return false;
    };
    let reason = if gw.key_cooldowns.cooling_until(&ch.name, &fp, now).is_some() {
        "cooldown"
    } else if !ch.limits.is_unlimited()
        && gw
            .limiter()
            .key_room(&ch.name, &fp, &ch.limits, tokens, now)
            != Room::Now
    {
        "limit"
    } else {
        return false;
    };
    metrics::counter!(telemetry::KEYS_HELD_BACK, "channel" => ch.name.clone(), "reason" => reason)
        .increment(1);
    true
}

/// `routing.balance: capacity`: the mean remaining fraction of the keys the plan walks on
/// channel `id` (1 for a channel without limits).
pub fn remaining_fraction(gw: &Gateway, snap: &Snapshot, id: ChannelId, keys: &PlanKeys) -> f64 {
    let Some(ch) = snap.table.channels.get(id) else {
        return 1.0;
    };
    if ch.limits.is_unlimited() {
        return 1.0;
    }
    let n = keys.count(id, ch.keys.len()).max(1);
    let limiter = gw.limiter();
    let now = crate::clock::instant();
    let sum: f64 = (0..n)
        .filter_map(|p| key_fp(snap, id, keys.key(id, p)))
        .map(|fp| limiter.key_remaining_fraction(&ch.name, &fp, &ch.limits, now))
        .sum();
    sum / n as f64
}

/// An attempt's hold on its key's limits (`None`: the key has none). Boxed: the hold
/// travels with each attempt's exchange, and inline its 240 bytes were copied with it
/// on every attempt, limited key or not.
pub type KeyHold = Option<Box<Admission<LimitGrant>>>;

/// A key with no room for the attempt: why, and when it will have room (when known).
#[derive(Debug, Clone)]
pub struct Held {
    pub why: String,
    pub wait: Option<Duration>,
}

/// Take key `k`'s share for one attempt reserving `tokens`; when it has no room (or cools),
/// wait for it up to [`MAX_KEY_WAIT`] within `deadline`. `Err` carries why it was not taken.
pub async fn hold_key(
    gw: &Gateway,
    snap: &Snapshot,
    ch: &Channel,
    id: ChannelId,
    k: usize,
    tokens: u64,
    deadline: Instant,
) -> Result<KeyHold, Held> {
    let cooling = gw.key_cooldowns.any();
    if !cooling && ch.limits.is_unlimited() {
        return Ok(None);
    }
    let Some(fp) = key_fp(snap, id, k) else {
        return Ok(None);
    };
    let give_up = deadline.min(Instant::now() + MAX_KEY_WAIT);
    loop {
        let now = Instant::now();
        let wait = match gw.key_cooldowns.cooling_until(&ch.name, &fp, now) {
            Some(until) => until.saturating_duration_since(now),
            None if ch.limits.is_unlimited() => return Ok(None),
            None => {
                let limiter = gw.limiter();
                match limiter
                    .take_key(&ch.name, &fp, &ch.limits, tokens, now)
                    .await
                {
                    Ok(a) => return Ok(Some(Box::new(a))),
                    Err(r) => r.retry_after.ok_or_else(|| Held {
                        why: format!(
                            "key_rate_limited: the attempt needs more than key {k}'s limits allow"
                        ),
                        wait: None,
                    })?,
                }
            }
        };
        let at = now + wait.max(Duration::from_millis(1));
        if at > give_up {
            return Err(Held {
                why: format!(
                    "key_rate_limited: key {k} of channel {} has no room for {} ms",
                    ch.name,
                    wait.as_millis()
                ),
                wait: Some(wait),
            });
        }
        tokio::time::sleep_until(at).await;
    }
}

/// An upstream answered 429: cool key `k` for as long as its headers say (R15.3), bounded
/// by `routing.max_upstream_cooldown`. Returns whether the key now cools.
pub fn learn(gw: &Gateway, snap: &Snapshot, id: ChannelId, k: usize, h: &http::HeaderMap) -> bool {
    let Some(hint) = upstream::rate_limited(h, SystemTime::now()) else {
        return false;
    };
    let (Some(ch), Some(fp)) = (snap.table.channels.get(id), key_fp(snap, id, k)) else {
        return false;
    };
    let max = snap.table.config.routing.max_upstream_cooldown;
    let cooled = gw
        .key_cooldowns
        .cool(&ch.name, &fp, hint.wait, max, Instant::now())
        .is_some();
    if cooled {
        metrics::counter!(telemetry::KEY_COOLDOWNS, "channel" => ch.name.clone(),
            "source" => hint.source.as_str())
        .increment(1);
        tracing::info!(channel = %ch.name, key = k, wait_ms = hint.wait.min(max).as_millis() as u64,
            source = hint.source.as_str(), "upstream key cooling after a rate-limit answer");
    }
    cooled
}
