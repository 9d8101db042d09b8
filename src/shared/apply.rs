//! Applying another replica's change to local state (R17.1): from a pub/sub message or from
//! a field pulled while converging. Nothing applied here is announced again (no echo), and
//! a change for a channel this replica does not configure is ignored (another config
//! generation; Redis keeps it for the replicas that do).

use std::time::Duration;

use tokio::time::Instant;

use super::run::Runtime;
use super::wire::{self, Field, Msg};
use crate::affinity::StickyKind;
use crate::config::model::Channel;
use crate::state::breaker::Limits;
use crate::state::channel::{ChannelState, Disabled};
use crate::state::KeyFp;
use crate::store::StateKey;

impl Runtime {
    /// A message from `sy:ev` (not one of ours).
    pub(crate) fn apply_msg(&mut self, msg: &Msg) {
        let ms = Duration::from_millis(msg.millis());
        let field = wire::field(&msg.f);
        if let Field::Binding(hash) = field {
            self.apply_binding(hash, &msg.v, ms);
            return;
        }
        if let Field::Task = field {
            if let (Some((client, id, channel)), Some(t)) =
                (wire::decode_task(&msg.v), self.tasks.get())
            {
                t.apply(&client, &id, &channel);
            }
            return;
        }
        let snap = (self.wiring.snapshot)();
        let Some(id) = snap
            .table
            .channels
            .iter()
            .position(|channel| channel.name == msg.c)
        else {
            return;
        };
        self.apply_field(
            &snap.table.channels[id],
            &snap.states[id],
            field,
            &msg.v,
            ms,
        );
    }

    pub(crate) fn apply_binding(&self, hash: u128, value: &str, ttl: Duration) {
        let Some((kind, channel)) = wire::decode_binding(value) else {
            return;
        };
        let Some(kind) = StickyKind::parse(kind) else {
            return;
        };
        if ttl.is_zero() {
            return;
        }
        self.wiring
            .bindings
            .apply(hash, kind, channel, Instant::now() + ttl);
    }

    /// One field of a channel's shared state. `v` and `ms` as published: a disabled state's
    /// stored form, a closed breaker's failure count, or the time left of a cooldown, mark
    /// or open breaker ("" = closed).
    pub(crate) fn apply_field(
        &mut self,
        ch: &Channel,
        st: &ChannelState,
        f: Field<'_>,
        value: &str,
        ms: Duration,
    ) {
        let now = Instant::now();
        match f {
            Field::Disabled(key) => {
                if let Some((at_ms, state)) = wire::decode_disabled(value) {
                    self.apply_disabled(st, key, state, at_ms);
                }
            }
            Field::Breaker(scope) => {
                let lim = Limits::of(&ch.resilience.circuit_breaker);
                if value.is_empty() {
                    st.breakers.apply_closed(scope);
                    st.metrics.breaker_state.set(0.0);
                } else {
                    st.breakers.apply_open(&lim, scope, ms, now);
                    if lim.failure_threshold > 0 {
                        st.metrics.breaker_state.set(2.0);
                    }
                }
            }
            Field::Failures(scope) => {
                let lim = Limits::of(&ch.resilience.circuit_breaker);
                if let Ok(n) = value.parse::<u32>() {
                    if st.breakers.apply_failures(&lim, scope, n, now) {
                        st.metrics.breaker_state.set(2.0);
                    }
                }
            }
            Field::Cooldown => st.cooldown.apply(&ch.resilience.cooldown, ms, now),
            Field::Missing(model) if !ms.is_zero() => st.missing_models.mark(model, now + ms, now),
            Field::KeyCooldown(key) if !ms.is_zero() => {
                if let Some(kc) = self.key_cooldowns.get() {
                    kc.apply(&ch.name, key, now + ms, now);
                }
            }
            Field::Reset => crate::state::outcome::reset_quiet(st),
            _ => {}
        }
    }

    /// A disabled state, when newer than the one this replica knows (last writer wins);
    /// persisted locally too, so a restart without Redis keeps it.
    fn apply_disabled(
        &mut self,
        st: &ChannelState,
        key: Option<KeyFp>,
        state: Option<Disabled>,
        at_ms: i64,
    ) {
        let known = self
            .versions
            .entry((st.name.to_string(), key))
            .or_insert(i64::MIN);
        if *known >= at_ms {
            return;
        }
        *known = at_ms;
        let (was, store_key) = match key {
            None => (st.disabled(), StateKey::Channel),
            Some(fp) => (st.key_disabled_why(&fp), StateKey::Key(fp.hex())),
        };
        if was == state {
            return;
        }
        match (key, &state) {
            (None, s) => {
                st.set_disabled(s.clone());
                metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => st.name.clone())
                    .set(if s.is_some() { 1.0 } else { 0.0 });
            }
            (Some(fp), Some(d)) => st.disable_key(fp, d.clone()),
            (Some(fp), None) => {
                st.enable_key(&fp);
            }
        }
        st.save_quiet(&self.wiring.store, store_key, state.as_ref());
        tracing::info!(channel = %st.name, key = ?key.map(|k| k.short()),
            disabled = state.is_some(), "disabled state changed on another replica");
    }
}
