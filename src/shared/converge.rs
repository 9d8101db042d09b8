//! Converging with the other replicas when Redis (re)appears (R17.2): at start, after an
//! outage, after a lost subscription, and when Redis restarted empty.
//!
//! 1. Load the scripts; read `sy:epoch` (setting it when missing). A different epoch than
//!    the last one seen means Redis is new to this replica or lost its data.
//! 2. Push this replica's state: disabled states (with the enables it knows of; last
//!    writer wins by time, so an older push never undoes a newer change), open breakers,
//!    cooldowns, "model not found" marks and key cooldowns (the later deadline wins), the
//!    bindings made while Redis was away — and every live binding when Redis is new.
//! 3. Pull everyone's: each configured channel's hash (one pipeline), and the bindings
//!    (`SCAN`, at most [`PULL_BINDINGS`]). A breaker open here but closed in Redis closes.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::conn::CallError;
use super::run::Runtime;
use super::wire::{self, Field};
use super::write::add_binding;
use crate::state::breaker::Limits;
use crate::state::keys::KeyFp;
use crate::state::sync::Change;

/// Bindings read from Redis in one convergence at most.
pub const PULL_BINDINGS: usize = 50_000;
/// Commands per pipeline while pushing.
const CHUNK: usize = 1000;

impl Runtime {
    pub(crate) async fn converge(&mut self) -> Result<(), CallError> {
        self.load_scripts().await?;
        let mine = format!("{:016x}", fastrand::u64(..));
        let epoch: String = self
            .conn
            .call(|mut conn| async move {
                let (epoch,): (String,) = redis::pipe()
                    .cmd("SET")
                    .arg(wire::EPOCH)
                    .arg(mine)
                    .arg("NX")
                    .ignore()
                    .cmd("GET")
                    .arg(wire::EPOCH)
                    .query_async(&mut conn)
                    .await?;
                Ok(epoch)
            })
            .await?;
        let fresh = self.epoch.as_deref() != Some(epoch.as_str());
        self.push_local(Some(fresh)).await?;
        self.pull(true).await?;
        self.pull_bindings().await?;
        if fresh {
            tracing::info!(epoch = %epoch, "shared state: joined Redis (pushed local state, pulled the others')");
        }
        self.epoch = Some(epoch);
        Ok(())
    }

    /// Everything this replica holds that the others must see.
    fn local_changes(&self) -> Vec<Change> {
        let snap = (self.wiring.snapshot)();
        let now = Instant::now();
        let mut out = Vec::new();
        for (ch, st) in snap.table.channels.iter().zip(snap.states.iter()) {
            let name = || ch.name.clone();
            // A state's version is the one Redis gave it when known (B-shared-versions),
            // else the local time of the change (made while Redis was away).
            let version = |key: Option<KeyFp>, at_ms: i64| {
                self.versions
                    .get(&(ch.name.clone(), key))
                    .copied()
                    .unwrap_or(at_ms)
            };
            if let Some(d) = st.disabled() {
                let at_ms = version(None, d.at_ms);
                out.push(Change::Disabled {
                    channel: name(),
                    key: None,
                    state: Some(d),
                    at_ms,
                });
            }
            for (fp, d) in st.disabled_keys() {
                let at_ms = version(Some(fp), d.at_ms);
                out.push(Change::Disabled {
                    channel: name(),
                    key: Some(fp),
                    state: Some(d),
                    at_ms,
                });
            }
            let lim = Limits::of(&ch.resilience.circuit_breaker);
            for (scope, left) in st.breakers.open_now(&lim, now) {
                out.push(Change::BreakerOpened {
                    channel: name(),
                    scope,
                    timeout: left,
                });
            }
            if let Some(left) = st.cooldown.remaining(&ch.resilience.cooldown, now) {
                out.push(Change::CooledDown {
                    channel: name(),
                    duration: left,
                });
            }
            for (model, left) in st.missing_models.list(now) {
                out.push(Change::ModelMissing {
                    channel: name(),
                    model,
                    duration: left,
                });
            }
            // Enables this replica knows of (the absence of a disable has a time too).
            for ((c, key), at_ms) in &self.versions {
                let enabled = match key {
                    None => st.disabled().is_none(),
                    Some(fp) => !st.key_disabled(fp),
                };
                if *c == ch.name && enabled {
                    out.push(Change::Disabled {
                        channel: name(),
                        key: *key,
                        state: None,
                        at_ms: *at_ms,
                    });
                }
            }
        }
        if let Some(kc) = self.key_cooldowns.get() {
            for (channel, key, until) in kc.cooling(now) {
                let wait = until.saturating_duration_since(now);
                out.push(Change::KeyCooled { channel, key, wait });
            }
        }
        out
    }

    /// Push local state; with `bindings`, also the bindings made while Redis was away (and
    /// every live one when `fresh`).
    async fn push_local(&mut self, bindings: Option<bool>) -> Result<(), CallError> {
        let changes = self.local_changes();
        let mut pipe = redis::pipe();
        let mut n = 0;
        for c in &changes {
            if let Change::Disabled {
                channel,
                key,
                at_ms,
                ..
            } = c
            {
                let version = self
                    .versions
                    .entry((channel.clone(), *key))
                    .or_insert(*at_ms);
                *version = (*version).max(*at_ms);
            }
            self.add(&mut pipe, c);
            n += 1;
            if n % CHUNK == 0 {
                self.exec(&pipe).await?;
                pipe = redis::pipe();
            }
        }
        let now = Instant::now();
        let Some(fresh) = bindings else {
            if n % CHUNK != 0 {
                self.exec(&pipe).await?;
            }
            return Ok(());
        };
        let mut bindings: Vec<(u128, &'static str, std::sync::Arc<str>, Duration)> = self
            .unsent
            .drain()
            .filter(|(_, (_, _, until))| *until > now)
            .map(|(h, (k, c, until))| (h, k, c, until - now))
            .collect();
        if fresh {
            for (h, b) in self.wiring.bindings.live() {
                bindings.push((
                    h,
                    b.kind.as_str(),
                    b.channel,
                    b.expires.saturating_duration_since(now),
                ));
            }
        }
        for (h, kind, channel, ttl) in &bindings {
            add_binding(&mut pipe, &self.origin, *h, kind, channel, *ttl);
            n += 1;
            if n % CHUNK == 0 {
                self.exec(&pipe).await?;
                pipe = redis::pipe();
            }
        }
        if n % CHUNK != 0 {
            self.exec(&pipe).await?;
        }
        super::count("published", n as u64);
        Ok(())
    }

    /// The periodic safety net ([`super::RESYNC`]): push local state (the scripts publish
    /// only what changes Redis) and pull every channel's, so a change lost on its way (a full
    /// outbox) is repaired within one period. Bindings and closings are left to messages.
    pub(crate) async fn resync(&mut self) -> Result<(), CallError> {
        self.push_local(None).await?;
        self.pull(false).await
    }

    /// Pull every configured channel's hash; with `close`, a breaker open here but absent
    /// from Redis (closed while this replica was away) closes.
    async fn pull(&mut self, close: bool) -> Result<(), CallError> {
        let snap = (self.wiring.snapshot)();
        let keys: Vec<String> = snap
            .table
            .channels
            .iter()
            .map(|channel| wire::channel_key(&channel.name))
            .collect();
        let (time, hashes): ((i64, i64), Vec<HashMap<String, String>>) = self
            .conn
            .call(|mut conn| async move {
                let mut pipe = redis::pipe();
                pipe.cmd("TIME");
                for k in &keys {
                    pipe.cmd("HGETALL").arg(k);
                }
                let mut replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
                let time = redis::from_redis_value(replies.remove(0))?;
                let hashes = replies
                    .into_iter()
                    .map(redis::from_redis_value)
                    .collect::<Result<_, _>>()?;
                Ok((time, hashes))
            })
            .await?;
        let redis_now = time.0 * 1000 + time.1 / 1000;
        for ((ch, st), h) in snap
            .table
            .channels
            .iter()
            .zip(snap.states.iter())
            .zip(hashes)
        {
            let lim = Limits::of(&ch.resilience.circuit_breaker);
            for (scope, _) in st.breakers.open_now(&lim, Instant::now()) {
                if close && !h.contains_key(&wire::breaker_field(scope.as_deref())) {
                    st.breakers.apply_closed(scope.as_deref());
                    st.metrics.breaker_state.set(0.0);
                }
            }
            for (f, v) in &h {
                let field = wire::field(f);
                let left = |until: i64| {
                    let ms = until
                        .saturating_sub(redis_now)
                        .clamp(0, wire::MAX_MS as i64);
                    Duration::from_millis(ms as u64)
                };
                let (v, ms) = match field {
                    Field::Breaker(_) => match wire::breaker_remaining(v, redis_now) {
                        Some(r) => ("open", Duration::from_millis(r as u64)),
                        None => continue,
                    },
                    Field::Cooldown | Field::Missing(_) | Field::KeyCooldown(_) => {
                        match v.parse::<i64>() {
                            Ok(u) if u > redis_now => ("", left(u)),
                            _ => continue,
                        }
                    }
                    Field::Disabled(_) | Field::Failures(_) => (v.as_str(), Duration::ZERO),
                    _ => continue,
                };
                self.apply_field(ch, st, field, v, ms);
            }
        }
        Ok(())
    }

    /// Read the live bindings (`SCAN`, bounded) into the local store.
    async fn pull_bindings(&mut self) -> Result<(), CallError> {
        let mut cursor: u64 = 0;
        let mut seen = 0usize;
        loop {
            let cur = cursor;
            let (next, keys): (u64, Vec<String>) = self
                .conn
                .call(|mut conn| async move {
                    redis::cmd("SCAN")
                        .arg(cur)
                        .arg("MATCH")
                        .arg(format!("{}*", wire::BINDING_PREFIX))
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut conn)
                        .await
                })
                .await?;
            if !keys.is_empty() {
                let ks = keys.clone();
                let vals: Vec<(Option<String>, i64)> = self
                    .conn
                    .call(|mut conn| async move {
                        let mut pipe = redis::pipe();
                        for k in &ks {
                            pipe.cmd("GET").arg(k).cmd("PTTL").arg(k);
                        }
                        let flat: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
                        let mut out = Vec::with_capacity(ks.len());
                        let mut it = flat.into_iter();
                        while let (Some(v), Some(t)) = (it.next(), it.next()) {
                            out.push((redis::from_redis_value(v)?, redis::from_redis_value(t)?));
                        }
                        Ok(out)
                    })
                    .await?;
                for (k, (v, ttl)) in keys.iter().zip(vals) {
                    if let (Some(h), Some(v)) = (wire::binding_hash(k), v) {
                        if ttl > 0 {
                            let ttl = (ttl as u64).min(wire::MAX_MS);
                            self.apply_binding(h, &v, Duration::from_millis(ttl));
                        }
                    }
                }
                seen += keys.len();
            }
            cursor = next;
            if cursor == 0 || seen >= PULL_BINDINGS {
                return Ok(());
            }
        }
    }
}
