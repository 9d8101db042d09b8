//! Auto-disable (R7.1, R7.2; seed 000 §10, seed 003 §2.1): the rules as a pure function, and
//! applying a verdict to a channel or one of its keys (persisted with reason and time).
//!
//! Multi-key channels lose only the offending key; when every key is disabled the channel is
//! disabled. Disabled keys are skipped through [`KeyMap`]: the plan walks the *enabled* keys
//! of each channel (its `key_count`/`key_cursor` callbacks see only them) and the loop maps
//! the plan's key position back to the real key index.

use std::collections::HashMap;

use crate::config::model::{AutoDisable, Channel};
use crate::routing::policy::Outcome;
use crate::routing::table::ChannelId;
use crate::state::channel::{ChannelState, Disabled};
use crate::store::{Store, WriteOp};

/// Why `outcome` should disable the channel (or key), or `None`. Respects
/// `auto_disable.enabled`; the channel's `auto_ban` is checked by [`apply`]. 429 never
/// disables (seed 003 §2.1).
pub fn should_disable(outcome: &Outcome, cfg: &AutoDisable) -> Option<String> {
    if !cfg.enabled {
        return None;
    }
    match outcome {
        Outcome::Status {
            code,
            error_code,
            error_type,
            message,
        } => {
            if *code == 429 {
                return None;
            }
            if cfg.statuses.contains(*code) {
                return Some(format!("upstream status {code}"));
            }
            let listed = |v: &Option<String>, list: &[String]| {
                v.as_deref()
                    .filter(|x| list.iter().any(|l| l.eq_ignore_ascii_case(x)))
                    .map(str::to_string)
            };
            if let Some(c) = listed(error_code, &cfg.error_codes) {
                return Some(format!("upstream error code `{c}` (status {code})"));
            }
            if let Some(t) = listed(error_type, &cfg.error_types) {
                return Some(format!("upstream error type `{t}` (status {code})"));
            }
            let lower = message.to_lowercase();
            cfg.keywords
                .iter()
                .find(|k| !k.is_empty() && lower.contains(&k.to_lowercase()))
                .map(|k| format!("upstream message contains `{k}` (status {code})"))
        }
        Outcome::ChannelError(c) => Some(format!("channel error `{c}`")),
        _ => None,
    }
}

/// What [`apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Nothing,
    /// Key `n` was disabled; the channel still has enabled keys.
    Key(usize),
    Channel,
}

/// Disable `key` of the channel, or the whole channel, for `reason`; persist it.
pub fn apply(
    store: &Store,
    ch: &Channel,
    st: &ChannelState,
    key: usize,
    reason: &str,
    now_ms: i64,
) -> Applied {
    if !ch.auto_ban || st.is_disabled() {
        return Applied::Nothing;
    }
    let persist = |key_index: Option<u32>| {
        store.try_send(WriteOp::ChannelState(crate::store::ChannelState {
            channel: ch.name.clone(),
            key_index,
            disabled: true,
            reason: reason.to_string(),
            ts_ms: now_ms,
            auto: true,
        }));
    };
    if ch.keys.len() > 1 {
        st.disable_key(key);
        persist(Some(key as u32));
        let all = (0..ch.keys.len()).all(|i| st.key_disabled(i));
        if !all {
            tracing::warn!(channel = %ch.name, key_index = key, by = "auto_disable", reason, "key disabled");
            return Applied::Key(key);
        }
    }
    st.set_disabled(Some(Disabled {
        reason: reason.to_string(),
        at_ms: now_ms,
        auto: true,
    }));
    persist(None);
    metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => ch.name.clone()).set(1.0);
    tracing::warn!(channel = %ch.name, key_index = key, by = "auto_disable", reason, "channel disabled");
    Applied::Channel
}

/// The enabled keys of the channels a request may use, fixed at plan time.
#[derive(Debug, Default)]
pub struct KeyMap {
    /// Only channels with at least one disabled key (and one enabled) appear here.
    enabled: HashMap<ChannelId, Vec<usize>>,
}

impl KeyMap {
    pub fn new(
        channels: impl IntoIterator<Item = ChannelId>,
        table: &[std::sync::Arc<Channel>],
        states: &[std::sync::Arc<ChannelState>],
    ) -> KeyMap {
        let mut enabled = HashMap::new();
        for id in channels {
            if enabled.contains_key(&id) {
                continue;
            }
            let (Some(ch), Some(st)) = (table.get(id), states.get(id)) else {
                continue;
            };
            let off = st.disabled_keys();
            if off.is_empty() || ch.keys.len() <= 1 {
                continue;
            }
            let on: Vec<usize> = (0..ch.keys.len())
                .filter(|i| !off.contains(&(*i as u32)))
                .collect();
            if !on.is_empty() {
                enabled.insert(id, on);
            }
        }
        KeyMap { enabled }
    }

    /// Key count the plan walks for channel `id` given its configured count.
    pub fn count(&self, id: ChannelId, configured: usize) -> usize {
        self.enabled.get(&id).map_or(configured, Vec::len)
    }

    /// The real key index of the plan's key position `pos`.
    pub fn key(&self, id: ChannelId, pos: usize) -> usize {
        self.enabled
            .get(&id)
            .and_then(|v| v.get(pos).copied())
            .unwrap_or(pos)
    }
}

#[cfg(test)]
#[path = "autodisable_tests.rs"]
mod tests;
