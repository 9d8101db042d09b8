//! The Redis connection of shared state and its health (R17.2): one multiplexed,
//! self-reconnecting connection for commands and scripts, every call bounded by
//! [`CALL_TIMEOUT`], and one up/down flag that the request path reads before it would make
//! a round trip. The flag's every change sets `switchyard_shared_state_up` and writes ONE
//! log line — never one per request.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisError;

/// A Redis call that has not answered by then counts as a failure (the request path then
/// runs on local state).
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Whether shared state is reachable. Starts down until the first successful exchange.
#[derive(Debug)]
pub struct Health {
    up: AtomicBool,
    /// Some exchange has succeeded or failed (until then every caller may try Redis).
    known: AtomicBool,
    /// A down transition was already logged since the last up (start counts as down).
    logged_down: AtomicBool,
    /// Failures seen so far: the runtime converges after any, even one that a caller
    /// (the rate-limit store) saw and recovered from between two of its ticks.
    downs: std::sync::atomic::AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        metrics::gauge!(crate::telemetry::SHARED_STATE_UP).set(0.0);
        Health {
            up: AtomicBool::new(false),
            known: AtomicBool::new(false),
            logged_down: AtomicBool::new(false),
            downs: Default::default(),
        }
    }
}

impl Health {
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// How many failures have been reported so far.
    pub fn downs(&self) -> u64 {
        self.downs.load(Ordering::Acquire)
    }

    /// Nothing has been exchanged with Redis yet.
    pub fn is_unknown(&self) -> bool {
        !self.known.load(Ordering::Acquire)
    }

    /// Redis answered: shared decisions go to Redis again.
    pub fn mark_up(&self) {
        self.known.store(true, Ordering::Release);
        if !self.up.swap(true, Ordering::AcqRel) {
            metrics::gauge!(crate::telemetry::SHARED_STATE_UP).set(1.0);
            self.logged_down.store(false, Ordering::Release);
            tracing::info!("shared state: Redis reachable, replicas share live state");
        }
    }

    /// Redis failed: run on local state. Logged once per outage.
    pub fn mark_down(&self, why: &dyn std::fmt::Display) {
        self.up.store(false, Ordering::Release);
        self.known.store(true, Ordering::Release);
        self.downs.fetch_add(1, Ordering::AcqRel);
        metrics::gauge!(crate::telemetry::SHARED_STATE_UP).set(0.0);
        if !self.logged_down.swap(true, Ordering::AcqRel) {
            tracing::error!(error = %why,
                "shared state: Redis unreachable; serving on local state (rate limits divided by shared.replicas) until it returns");
        }
    }
}

/// The connection and its health, shared by the runtime and the rate-limit store.
#[derive(Clone)]
pub struct Conn {
    pub client: redis::Client,
    pub manager: ConnectionManager,
    pub health: Arc<Health>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("up", &self.health.is_up())
            .finish()
    }
}

/// A failed or timed-out call.
#[derive(Debug)]
pub enum CallError {
    Redis(RedisError),
    Timeout,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Redis(e) => write!(f, "{e}"),
            CallError::Timeout => write!(f, "no answer within {CALL_TIMEOUT:?}"),
        }
    }
}

impl CallError {
    /// Redis lost its scripts (it restarted): load them and try again.
    /// The connection failed (refused, dropped, I/O): a reconnect is under way, so one
    /// immediate retry may succeed.
    pub fn is_connection(&self) -> bool {
        matches!(self, CallError::Redis(e) if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped())
    }

    pub fn is_noscript(&self) -> bool {
        matches!(self, CallError::Redis(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
    }
}

impl Conn {
    /// A lazy connection to `url` (nothing is dialled until the first call).
    pub fn open(url: &str) -> Result<Conn, RedisError> {
        let client = redis::Client::open(url)?;
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(0);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), cfg)?;
        Ok(Conn {
            client,
            manager,
            health: Arc::new(Health::default()),
        })
    }

    /// Run `f` on the connection within [`CALL_TIMEOUT`].
    pub async fn call<T, F, Fut>(&self, f: F) -> Result<T, CallError>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = Result<T, RedisError>>,
    {
        match tokio::time::timeout(CALL_TIMEOUT, f(self.manager.clone())).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(CallError::Redis(e)),
            Err(_) => Err(CallError::Timeout),
        }
    }
}
