//! Operator enable/disable of a channel (R7.2; `POST /admin/channels/{name}/enable` and
//! `/disable`): the in-memory state and its durable, ordered persistence — an "enable" is
//! never lost to a full store queue, so it cannot come back disabled at restart.

use super::channel::{ChannelState, Disabled};
use crate::store::{StateKey, Store};

/// Disable (`enable: false`, stored with `reason`) or enable the channel. Enabling also
/// clears its disabled keys, breakers, cooldown, "model not found" marks and health window.
pub fn set_enabled(store: &Store, st: &ChannelState, enable: bool, reason: &str) {
    if enable {
        st.set_disabled(None);
        for fp in st.clear_disabled_keys() {
            st.save(store, StateKey::Key(fp.hex()), None);
        }
        super::outcome::reset(st);
        st.save(store, StateKey::Channel, None);
    } else {
        let disabled = Disabled {
            reason: reason.to_string(),
            at_ms: crate::store::now_ms(),
            auto: false,
        };
        st.set_disabled(Some(disabled.clone()));
        st.save(store, StateKey::Channel, Some(&disabled));
    }
    metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => st.name.clone())
        .set(if enable { 0.0 } else { 1.0 });
}
