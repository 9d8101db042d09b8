//! The seam through which live-state changes leave the process (R17.1): a
//! [`Change`] is handed to an attached [`Sink`] (the shared-state runtime, when
//! `shared.redis` is set) and nothing happens when none is attached. The hot path never
//! builds a `Change` for a request that changes nothing: changes are state transitions
//! (a breaker opening, a key disabled, a binding made), not requests.
//!
//! Everything is keyed by channel name, key fingerprint and upstream model name — never a
//! position — so replicas on different config generations agree on what a change names.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::channel::Disabled;
use super::keys::KeyFp;

/// One change of live state that the other replicas must see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A breaker opened (or re-opened) for `timeout`. `scope`: `None` = the provider
    /// breaker, `Some(model)` = that upstream model's breaker.
    BreakerOpened {
        channel: String,
        scope: Option<String>,
        timeout: Duration,
    },
    /// A closed breaker counted one more failure (R6.1): the deployment counts them
    /// together, and the one whose count reaches `threshold` opens it for `timeout`
    /// everywhere (B-shared-failure-counts).
    BreakerFailed {
        channel: String,
        scope: Option<String>,
        threshold: u32,
        timeout: Duration,
    },
    /// A closed breaker with failures counted saw a success: the shared count starts again.
    BreakerSucceeded {
        channel: String,
        scope: Option<String>,
    },
    /// A breaker closed (its probes succeeded).
    BreakerClosed {
        channel: String,
        scope: Option<String>,
    },
    /// This replica would send the half-open probe: it asks for the one probe lease of
    /// the deployment, for `ttl`.
    ProbeWanted {
        channel: String,
        scope: Option<String>,
        ttl: Duration,
    },
    /// The route cooldown (R6.4) started for `duration`.
    CooledDown { channel: String, duration: Duration },
    /// The upstream answered "model not found" for `model`: out of plans for `duration`.
    ModelMissing {
        channel: String,
        model: String,
        duration: Duration,
    },
    /// The disabled state of the channel (`key: None`) or of one key changed; `state:
    /// None` = enabled. The latest `at_ms` wins everywhere.
    Disabled {
        channel: String,
        key: Option<KeyFp>,
        state: Option<Disabled>,
        at_ms: i64,
    },
    /// The channel was enabled by an operator or a probe: breakers, cooldown and
    /// "model not found" marks are cleared.
    Reset { channel: String, at_ms: i64 },
    /// An upstream key cools down for `wait` (R15.3; `key` is its fingerprint).
    KeyCooled {
        channel: String,
        key: String,
        wait: Duration,
    },
    /// A sticky binding (R8.3) was made or refreshed for `ttl`.
    Bound {
        hash: u128,
        kind: &'static str,
        channel: Arc<str>,
        ttl: Duration,
    },
    /// `channel` accepted `client`'s task `id` (R10.5): the other replicas learn the
    /// binding at once instead of from the store (B-shared-task-bindings).
    TaskBound {
        client: String,
        id: String,
        channel: String,
    },
}

impl Change {
    /// A failure count's change: worth sending only while Redis answers (one held back
    /// through an outage would count again what the local breaker already counted).
    pub fn is_count(&self) -> bool {
        matches!(
            self,
            Change::BreakerFailed { .. } | Change::BreakerSucceeded { .. }
        )
    }
}

/// Where changes go (the shared-state runtime). `emit` must not block: it runs on the
/// request path.
pub trait Sink: Send + Sync + 'static {
    fn emit(&self, change: Change);

    /// Shared state answers now. While it does not, decisions that need the other
    /// replicas (the one probe lease) are taken locally.
    fn is_live(&self) -> bool {
        true
    }
}

/// An optional, attach-once sink.
#[derive(Default)]
pub struct Hook(OnceLock<Arc<dyn Sink>>);

impl Hook {
    /// Attach `sink` (a second attach is ignored).
    pub fn attach(&self, sink: Arc<dyn Sink>) {
        let _ = self.0.set(sink);
    }

    /// State is shared with other replicas.
    pub fn is_attached(&self) -> bool {
        self.0.get().is_some()
    }

    /// Hand a change to the sink; `change` is only built when one is attached.
    pub fn emit(&self, change: impl FnOnce() -> Change) {
        if let Some(s) = self.0.get() {
            s.emit(change());
        }
    }

    /// The attached sink, if any.
    pub fn sink(&self) -> Option<Arc<dyn Sink>> {
        self.0.get().cloned()
    }
}

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_attached() {
            "Hook(attached)"
        } else {
            "Hook(none)"
        })
    }
}
