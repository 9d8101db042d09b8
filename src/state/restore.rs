//! Restore persisted disabled state at start-up (R7.2): whole channels, and keys by their
//! fingerprint.
//!
//! Rows stored by key *position* before schema v4 are resolved against the keys configured
//! now — the first start after the upgrade is expected to run the key list of the last run
//! before it — and rewritten by fingerprint, so later edits of the list no longer move
//! them. A position the channel no longer has cannot be resolved and is dropped (logged);
//! rows of channels that are not configured are left untouched.

use crate::state::channel::Disabled;
use crate::state::keys::KeyFp;
use crate::state::Snapshot;
use crate::store::{StateKey, StateRow as Row, Store};

/// Apply the disabled rows of `store` to the channels of `snap` (start-up, before serving).
pub async fn restore(store: &Store, snap: &Snapshot) {
    let rows = match store.disabled_states().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "could not read persisted channel state");
            return;
        }
    };
    for row in rows {
        let Some(id) = snap
            .table
            .channels
            .iter()
            .position(|c| c.name == row.channel)
        else {
            continue;
        };
        let (st, fps) = (&snap.states[id], &snap.key_fps[id]);
        let disabled = Disabled {
            reason: row.reason.clone(),
            at_ms: row.ts_ms,
            auto: row.auto,
        };
        match &row.key {
            StateKey::Channel => {
                metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => row.channel.clone())
                    .set(1.0);
                st.set_disabled(Some(disabled));
            }
            StateKey::Key(hex) => match KeyFp::parse(hex) {
                Some(fp) => st.disable_key(fp, disabled),
                None => {
                    tracing::warn!(channel = %row.channel, "unreadable key fingerprint skipped")
                }
            },
            StateKey::LegacyIndex(n) => migrate_legacy(store, st, fps, &row, *n, disabled),
        }
    }
}

/// A pre-v4 row (key by position): disable the key configured at that position now and
/// store it by fingerprint instead.
fn migrate_legacy(
    store: &Store,
    st: &crate::state::ChannelState,
    fps: &[KeyFp],
    row: &Row,
    n: u32,
    d: Disabled,
) {
    let fp = usize::try_from(n).ok().and_then(|i| fps.get(i)).copied();
    match fp {
        Some(fp) => {
            st.disable_key(fp, d.clone());
            st.save(store, StateKey::Key(fp.hex()), Some(&d));
            tracing::info!(channel = %row.channel, key_index = n, key = %fp, "disabled key migrated from its position to its fingerprint");
        }
        None => {
            tracing::info!(channel = %row.channel, key_index = n, "disabled key position no longer configured: dropped")
        }
    }
    st.save(store, row.key.clone(), None);
}
