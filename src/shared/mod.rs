//! Live state shared by several replicas through Redis (R17; `shared.redis`).
//!
//! # What is shared, and how fresh it is
//!
//! Every request still decides on LOCAL state — the breakers, cooldowns, disabled flags,
//! "model not found" marks, bindings and retry budget each replica keeps anyway — so a
//! request that needs no shared decision (an unlimited client on a healthy channel with no
//! sticky key) makes no Redis round trip at all. What is shared is the *changes*:
//!
//! - A state transition (a breaker opening or closing, a cooldown, a "model not found" mark,
//!   a key's `Retry-After` cooldown, a disable or enable by an operator, the auto-disable
//!   rules or a probe, a sticky binding made or moved) is handed to the [`Outbox`] by the
//!   code that made it ([`crate::state::sync`]), written to Redis by one Lua script that
//!   stores it and publishes it on `sy:ev` atomically ([`scripts`]), and applied by every
//!   other replica's subscriber. Staleness: one outbox batch plus one pub/sub hop —
//!   milliseconds (measured in `tests/replicas/`); the bound we state is one second.
//! - The half-open probe: the replica whose breaker would send it first takes the
//!   deployment's one probe lease (a hash field with an expiry, taken atomically), so one
//!   probe runs across all replicas ([`crate::state::breakers`]).
//! - Breaker failure counts: while Redis answers, each failure of a closed breaker is added
//!   to the deployment's count (the `fail` op of [`scripts`]) and the new count is published;
//!   the failure that reaches the threshold opens the breaker for every replica. A success
//!   after failures drops the count. Replicas agree on the count within one message.
//! - Task bindings: published when made (the store keeps them durably), so a follow-up on
//!   another replica finds its channel without waiting for the store.
//! - Sticky bindings: announced when made or moved; a refresh when it moves the shared
//!   expiry by more than 1/16 of the TTL, so another replica's copy can expire up to
//!   TTL/16 early (7.5 min of 2 h) and a hot key costs no message per request.
//! - The retry budget: counts exchanged every second ([`crate::routing::budget`]).
//! - Rate limits: [`limits`] — one script call per limited request (the one
//!   shared decision that must be a round trip).
//!
//! Messages are the fast path; every [`RESYNC`] each replica also pushes its channels' state
//! (the scripts publish only what changes Redis) and pulls everyone's, so a change lost on
//! its way (a full outbox) is repaired within that period.
//!
//! State is keyed by channel name, key fingerprint and upstream model name ([`wire`]),
//! never by position: replicas on different config generations name the same things.
//!
//! # When Redis is unreachable
//!
//! Requests keep flowing on local state; `switchyard_shared_state_up` is 0 and ONE error
//! line says so ([`conn::Health`]); rate limits are divided by `shared.replicas`. Changes
//! made meanwhile stay local. When Redis answers again (checked every [`TICK`]), each
//! replica converges ([`converge`]): it re-subscribes, pushes its disabled states
//! (last-writer-wins by time), open breakers, cooldowns and marks, pulls everyone's, and —
//! when Redis came back empty (a new `sy:epoch`) — pushes its live bindings too.

//! # Where the request path meets it
//!
//! Breakers, cooldowns, marks, disabled state, bindings and the retry budget need no call
//! from the request path: the state objects it already uses announce their changes, and
//! [`crate::app::start`] starts the runtime (`Running::shared`). Two seams are for the
//! code that enforces rate limits and upstream key cooldowns: build its `Limiter` on
//! [`limits::LimitStore`] — `Shared(Box::new(shared.limit_store()))` when
//! `Running::shared` is set, else `Local(..)` — and hand its `KeyCooldowns` to
//! [`Shared::attach_key_cooldowns`].

pub mod apply;
pub mod conn;
pub mod converge;
pub mod limits;
pub mod run;
pub mod scripts;
pub mod wire;
pub mod write;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::affinity::Bindings;
use crate::limits::KeyCooldowns;
use crate::routing::budget::RetryBudget;
use crate::state::sync::{Change, Sink};
use crate::state::{KeyFp, Registry, Snapshot};
use crate::store::Store;

pub use conn::{Conn, Health};

/// The runtime checks Redis's health (and converges after an outage) this often.
pub const TICK: Duration = Duration::from_millis(250);
/// Every replica pushes and pulls the channels' whole state this often (a safety net for a
/// change lost on its way; messages normally deliver it at once).
pub const RESYNC: Duration = Duration::from_secs(10);
/// Changes waiting for Redis at most; more are dropped (and counted).
pub const OUTBOX: usize = 8192;

/// What the runtime reads and writes locally.
#[derive(Clone)]
pub struct Wiring {
    /// The live snapshot (channels, their state and key fingerprints).
    pub snapshot: Arc<dyn Fn() -> Arc<Snapshot> + Send + Sync>,
    pub bindings: Arc<Bindings>,
    /// Disabled states another replica changed are persisted here too.
    pub store: Store,
    /// The live retry budget (replaced on reload).
    pub budget: Arc<dyn Fn() -> Arc<RetryBudget> + Send + Sync>,
    /// `shared.replicas`.
    pub replicas: u32,
    /// How often the whole channel state is pushed and pulled ([`RESYNC`]).
    pub resync: Duration,
}

/// The sink every state object hands its changes to: a bounded queue to the runtime.
/// `emit` never blocks (it runs on the request path); a full queue drops and counts.
#[derive(Debug)]
pub struct Outbox {
    tx: mpsc::Sender<Change>,
    health: Arc<Health>,
}

impl Sink for Outbox {
    fn emit(&self, change: Change) {
        if self.tx.try_send(change).is_err() {
            count("dropped", 1);
        }
    }

    fn is_live(&self) -> bool {
        self.health.is_up()
    }
}

pub(crate) fn count(result: &'static str, n: u64) {
    metrics::counter!(crate::telemetry::SHARED_CHANGES, "result" => result).increment(n);
}

/// The LWW times of the disabled states this replica knows, by (channel, key).
pub(crate) type Versions = HashMap<(String, Option<KeyFp>), i64>;

/// A running shared-state runtime.
#[derive(Clone)]
pub struct Shared {
    pub conn: Conn,
    origin: Arc<str>,
    sink: Arc<Outbox>,
    replicas: u32,
    key_cooldowns: Arc<OnceLock<Arc<KeyCooldowns>>>,
    tasks: Arc<OnceLock<Arc<dyn TaskBindings>>>,
}

/// Where the task bindings other replicas made are applied (R10.5, R17.1): the request
/// path's task cache, which this layer cannot name ([`Shared::attach_tasks`]).
pub trait TaskBindings: Send + Sync + 'static {
    /// `channel` accepted `client`'s task `id` on another replica.
    fn apply(&self, client: &str, id: &str, channel: &str);
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("origin", &self.origin)
            .field("up", &self.conn.health.is_up())
            .finish()
    }
}

impl Shared {
    /// Connect lazily to `url`, share `registry`'s channel states and the bindings through
    /// the outbox, and run the runtime until `shutdown` turns true.
    pub fn start(
        url: &str,
        wiring: Wiring,
        registry: &Registry,
        shutdown: watch::Receiver<bool>,
    ) -> Result<(Shared, tokio::task::JoinHandle<()>), redis::RedisError> {
        let conn = Conn::open(url)?;
        let (tx, rx) = mpsc::channel(OUTBOX);
        let origin: Arc<str> = format!("{:016x}", fastrand::u64(..)).into();
        let shared = Shared {
            conn: conn.clone(),
            origin: origin.clone(),
            sink: Arc::new(Outbox {
                tx,
                health: conn.health.clone(),
            }),
            replicas: wiring.replicas.max(1),
            key_cooldowns: Arc::default(),
            tasks: Arc::new(OnceLock::new()),
        };
        registry.share(shared.sink());
        wiring.bindings.share(shared.sink());
        let rt = run::Runtime::new(
            conn,
            origin,
            wiring,
            shared.key_cooldowns.clone(),
            shared.tasks.clone(),
        );
        let task = tokio::spawn(rt.run(rx, shutdown));
        Ok((shared, task))
    }

    /// Redis answers (the last exchange succeeded).
    pub fn is_up(&self) -> bool {
        self.conn.health.is_up()
    }

    /// This replica's id in shared state.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The sink state objects announce their changes to.
    pub fn sink(&self) -> Arc<dyn Sink> {
        self.sink.clone()
    }

    /// Share upstream key cooldowns (R15.3): `kc`'s cool-downs are announced, and other
    /// replicas' are applied to it.
    pub fn attach_key_cooldowns(&self, kc: Arc<KeyCooldowns>) {
        kc.share(self.sink());
        let _ = self.key_cooldowns.set(kc);
    }

    /// Share task bindings (R10.5): the task cache announces its new bindings through
    /// [`Shared::sink`] ([`crate::state::sync::Change::TaskBound`]), and other replicas'
    /// are applied to `tasks`, so a follow-up on another replica finds the binding at once
    /// instead of after the store has it.
    pub fn attach_tasks(&self, tasks: Arc<dyn TaskBindings>) {
        let _ = self.tasks.set(tasks);
    }

    /// Whether this replica sends the next active probe of `channel`'s breaker `scope`
    /// (R19.2): the first replica to ask within `interval` takes the turn (`SET NX PX`), so
    /// the deployment sends one probe per interval. While Redis does not answer every replica
    /// probes on its own (a probe costs one token; a recovery must not wait for Redis).
    pub async fn prober_turn(
        &self,
        channel: &str,
        scope: Option<&str>,
        interval: Duration,
    ) -> bool {
        let key = wire::prober_key(channel, scope);
        let origin = self.origin.to_string();
        let ms = interval.as_millis().max(1) as u64;
        let reply = self
            .conn
            .call(|mut c| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(&origin)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms)
                    .query_async::<Option<String>>(&mut c)
                    .await
            })
            .await;
        match reply {
            Ok(taken) => taken.is_some(),
            Err(_) => true,
        }
    }

    /// A rate-limit store on this connection ([`limits`]): limits are shared
    /// while Redis answers and divided by `shared.replicas` while it does not.
    pub fn limit_store(&self) -> crate::shared::limits::RedisStore {
        crate::shared::limits::RedisStore::new(self.conn.clone(), self.replicas)
    }
}
