//! Auto-disable (R7.1, R7.2): the rules as a pure function, and
//! applying a verdict to a channel or one of its keys (persisted with reason and time).
//!
//! Multi-key channels lose only the offending key; when every key is disabled the channel is
//! disabled. A key is identified by its fingerprint ([`KeyFp`]), never by its position, so
//! removing or reordering keys in the config moves no state onto another key. The rules
//! see the status after the channel's `status_code_mapping`. Disabled keys are skipped
//! through [`KeyMap`]: the plan walks the *enabled* keys
//! of each channel (its `key_count`/`key_cursor` callbacks see only them) and the loop maps
//! the plan's key position back to the real key index.

use std::collections::HashMap;

use super::keys::KeyFp;
use super::Snapshot;
use crate::config::model::{AutoDisable, Channel};
use crate::routing::policy::Outcome;
use crate::routing::table::ChannelId;
use crate::state::channel::{ChannelState, Disabled};
use crate::store::{StateKey, Store};

/// Why `outcome` should disable the channel (or key), or `None`. Respects
/// `auto_disable.enabled`; the channel's `auto_ban` is checked by [`apply`]. 429 never
/// disables (R7.1).
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

/// Disable the key with fingerprint `key` (`None`: unknown key), or the whole channel, for
/// `reason`; persist it (durably). `fps` are the channel's key fingerprints in the request's
/// table.
pub fn apply(
    store: &Store,
    ch: &Channel,
    st: &ChannelState,
    fps: &[KeyFp],
    key: usize,
    reason: &str,
    now_ms: i64,
) -> Applied {
    if !ch.auto_ban || st.is_disabled() {
        return Applied::Nothing;
    }
    let disabled = Disabled {
        reason: reason.to_string(),
        at_ms: now_ms,
        auto: true,
    };
    if ch.keys.len() > 1 {
        if let Some(fp) = fps.get(key) {
            st.disable_key(*fp, disabled.clone());
            st.save(store, StateKey::Key(fp.hex()), Some(&disabled));
            if !fps.iter().all(|f| st.key_disabled(f)) {
                tracing::warn!(channel = %ch.name, key_index = key, key = %fp, by = "auto_disable", reason, "key disabled");
                return Applied::Key(key);
            }
        }
    }
    st.set_disabled(Some(disabled.clone()));
    st.save(store, StateKey::Channel, Some(&disabled));
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
    pub fn new(channels: impl IntoIterator<Item = ChannelId>, snap: &Snapshot) -> KeyMap {
        let mut enabled = HashMap::new();
        for id in channels {
            if enabled.contains_key(&id) {
                continue;
            }
            let (Some(ch), Some(st), Some(fps)) = (
                snap.table.channels.get(id),
                snap.states.get(id),
                snap.key_fps.get(id),
            ) else {
                continue;
            };
            if ch.keys.len() <= 1 || !st.has_disabled_keys() {
                continue;
            }
            let off = st.disabled_keys();
            let on: Vec<usize> = (0..ch.keys.len())
                .filter(|i| fps.get(*i).is_none_or(|fp| !off.contains_key(fp)))
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
