//! `ChannelState` (per channel name: key cursor, disabled flags, breakers, health) and the
//! `Registry` that owns them.

use crate::lock::lock;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::keys::KeyFp;
use crate::routing::table::RouteTable;
use crate::store::{StateKey, Store};

/// Why a channel (or key) is disabled.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Disabled {
    pub reason: String,
    pub at_ms: i64,
    /// true: by the auto-disable rules (may be lifted by a probe); false: by an operator.
    pub auto: bool,
}

/// Mutable state of one channel, shared by every table that contains a channel of this name.
#[derive(Debug, Default)]
pub struct ChannelState {
    /// Shared with the request log's attempt records (no copy per attempt).
    pub name: std::sync::Arc<str>,
    /// Where the next request starts in the channel's key list (round robin).
    key_cursor: AtomicUsize,
    disabled: Mutex<Option<Disabled>>,
    /// Disabled keys by fingerprint (R7.1): the state follows the key, not its position.
    disabled_keys: Mutex<BTreeMap<KeyFp, Disabled>>,
    /// Upstream models this channel answered "model not found" for (B-model-not-found).
    pub missing_models: super::models::MissingModels,
    /// Found not to serve `/v1/responses` (B-responses-discovery): its Responses requests are translated.
    pub responses_path: super::responses_path::ResponsesPath,
    /// Disabled/enabled changes on their way to SQLite (durable, ordered).
    pub persist: super::persist::Persister,
    /// Circuit breakers (R6.1–R6.3).
    pub breakers: super::breaker::Breakers,
    /// Route cooldown (R6.4).
    pub cooldown: super::cooldown::Cooldown,
    /// Sliding window of outcomes and the last model listing (R7.3).
    pub health: super::health::Health,
    /// The last 5 minutes of attempts for the status page (R20.2).
    pub recent: crate::telemetry::window::Recent,
    /// Moving latency and error rate per upstream model (`routing.balance: latency`, R19.1).
    pub scores: super::score::Scores,
    /// Pre-registered metric handles of this channel (hot path).
    pub metrics: crate::telemetry::ChannelMetrics,
    /// Where changes go when state is shared with other replicas (R17.1).
    pub sync: super::sync::Hook,
}

impl ChannelState {
    pub fn new(name: &str) -> Self {
        ChannelState {
            name: name.into(),
            metrics: crate::telemetry::ChannelMetrics::new(name),
            ..Default::default()
        }
    }

    /// The key index a new request starts at (advances the round-robin cursor).
    pub fn next_key_start(&self, key_count: usize) -> usize {
        if key_count <= 1 {
            return 0;
        }
        self.key_cursor.fetch_add(1, Ordering::Relaxed) % key_count
    }

    pub fn disabled(&self) -> Option<Disabled> {
        lock(&self.disabled).clone()
    }

    pub fn is_disabled(&self) -> bool {
        lock(&self.disabled).is_some()
    }

    pub fn set_disabled(&self, d: Option<Disabled>) {
        *lock(&self.disabled) = d;
    }

    /// Disabled keys (configured or not) with why and when.
    pub fn disabled_keys(&self) -> BTreeMap<KeyFp, Disabled> {
        lock(&self.disabled_keys).clone()
    }

    pub fn has_disabled_keys(&self) -> bool {
        !lock(&self.disabled_keys).is_empty()
    }

    pub fn key_disabled(&self, fp: &KeyFp) -> bool {
        lock(&self.disabled_keys).contains_key(fp)
    }

    /// The disable of one key, if it is disabled.
    pub fn key_disabled_why(&self, fp: &KeyFp) -> Option<Disabled> {
        lock(&self.disabled_keys).get(fp).cloned()
    }

    pub fn disable_key(&self, fp: KeyFp, d: Disabled) {
        lock(&self.disabled_keys).insert(fp, d);
    }

    /// Enable one key again; true when it was disabled.
    pub fn enable_key(&self, fp: &KeyFp) -> bool {
        lock(&self.disabled_keys).remove(fp).is_some()
    }

    /// Enable every key; returns the keys that were disabled.
    pub fn clear_disabled_keys(&self) -> Vec<KeyFp> {
        let mut disabled = lock(&self.disabled_keys);
        let out = disabled.keys().copied().collect();
        disabled.clear();
        out
    }

    /// Share this channel's state with other replicas through `sink` (R17.1).
    pub fn share(&self, sink: Arc<dyn super::sync::Sink>) {
        self.breakers.share(&self.name, sink.clone());
        self.sync.attach(sink);
    }

    /// Persist (durably, in order) that `key` of this channel is now `state` (None: enabled),
    /// and announce it to the other replicas when state is shared.
    pub fn save(&self, store: &Store, key: StateKey, state: Option<&Disabled>) {
        let row = self.save_quiet(store, key, state);
        let fp = match &row.key {
            StateKey::Channel => None,
            StateKey::Key(hex) => match KeyFp::parse(hex) {
                Some(fp) => Some(fp),
                None => return,
            },
            StateKey::LegacyIndex(_) => return,
        };
        self.sync.emit(|| super::sync::Change::Disabled {
            channel: self.name.to_string(),
            key: fp,
            state: state.cloned(),
            at_ms: row.ts_ms,
        });
    }

    /// [`ChannelState::save`] without the announcement (a change another replica made).
    pub fn save_quiet(
        &self,
        store: &Store,
        key: StateKey,
        state: Option<&Disabled>,
    ) -> crate::store::StateRow {
        let row = crate::store::StateRow {
            channel: self.name.to_string(),
            key,
            disabled: state.is_some(),
            reason: state.map(|d| d.reason.clone()).unwrap_or_default(),
            ts_ms: state.map_or_else(crate::store::now_ms, |d| d.at_ms),
            auto: state.is_none_or(|d| d.auto),
        };
        self.persist.send(store, row.clone());
        row
    }
}

/// Owner of every `ChannelState`, keyed by channel name.
#[derive(Debug, Default)]
pub struct Registry {
    map: Mutex<HashMap<String, Arc<ChannelState>>>,
    /// Attached to every channel state, present and future, when state is shared.
    sync: super::sync::Hook,
}

impl Registry {
    /// The state of each channel of `table`, by `ChannelId`. Creates state for new names and
    /// drops the state of names the table no longer has (R2.5).
    pub fn bind(&self, table: &RouteTable) -> Vec<Arc<ChannelState>> {
        let mut map = lock(&self.map);
        map.retain(|name, _| table.channels.iter().any(|c| &c.name == name));
        table
            .channels
            .iter()
            .map(|c| {
                map.entry(c.name.clone())
                    .or_insert_with(|| {
                        let st = ChannelState::new(&c.name);
                        if let Some(sink) = self.sync.sink() {
                            st.share(sink);
                        }
                        Arc::new(st)
                    })
                    .clone()
            })
            .collect()
    }

    /// Share every channel's state, present and future, through `sink` (R17.1).
    pub fn share(&self, sink: Arc<dyn super::sync::Sink>) {
        let map = lock(&self.map);
        self.sync.attach(sink.clone());
        for st in map.values() {
            st.share(sink.clone());
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<ChannelState>> {
        lock(&self.map).get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<_> = lock(&self.map).keys().cloned().collect();
        names.sort();
        names
    }
}
