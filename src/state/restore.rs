//! Restore persisted runtime state at start-up: disabled channels and keys (R7.2).

use crate::proxy::gateway::Gateway;
use crate::state::channel::Disabled;

pub async fn restore(gw: &Gateway) {
    let rows = match gw.store.disabled_states().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "could not read persisted channel state");
            return;
        }
    };
    for row in rows {
        let Some(st) = gw.registry.get(&row.channel) else {
            continue;
        };
        match row.key_index {
            None => {
                metrics::gauge!(crate::telemetry::CHANNEL_DISABLED, "channel" => row.channel.clone())
                    .set(1.0);
                st.set_disabled(Some(Disabled {
                    reason: row.reason,
                    at_ms: row.ts_ms,
                    auto: row.auto,
                }))
            }
            Some(k) => {
                st.disable_key(k as usize);
            }
        }
    }
}
