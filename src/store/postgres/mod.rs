//! PostgreSQL backend of the store (R17, `storage.url`): the same [`Store`] API as SQLite,
//! for several replicas sharing one database.
//!
//! * Writes still go through the bounded queue to one writer thread (`writer.rs`), which
//!   owns its own connection and commits batches; while PostgreSQL is unreachable it holds
//!   what it drained (request-log entries up to the queue capacity, the rest up to
//!   [`MAX_HELD`]), drops and counts beyond, and applies the held writes in order once the
//!   database answers again.
//! * Reads and the one request-path statement (the quota debit, `quota.rs`) use a small
//!   connection pool on the caller's runtime, each bounded by a timeout.
//! * Reachability is one flag ([`Reach`]): the writer, the pool users and the lease task
//!   report to it; it drives `switchyard_store_up` and logs once per change.
//! * Migrations run under a session advisory lock, so replicas starting together apply
//!   each version once (`schema.rs`).

mod apply;
mod batch;
mod prune;
pub mod quota;
mod reads;
mod schema;
mod writer;

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use super::sqlite::writer::Shared;
use super::{Inner, Store, StoreError};

pub use batch::{decide, Decided, MAX_BATCH};
pub use quota::{Debit, Quota, Swept};

/// Writes (other than request-log entries) held in memory while PostgreSQL is unreachable;
/// beyond, they are dropped, counted and logged.
pub const MAX_HELD: usize = 100_000;

/// Tunables of the PostgreSQL backend.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Bounded queue between the request path and the writer; also how many request-log
    /// entries are held while the database is unreachable.
    pub queue_capacity: usize,
    /// Most ops written in one transaction.
    pub max_batch: usize,
    /// A precharge's lease: renewed by its replica while the request lives; expired, a
    /// surviving replica refunds it.
    pub lease_ttl: Duration,
    /// Bound on a request-path statement (the quota debit) and on getting a connection.
    pub timeout: Duration,
    /// Pooled connections per replica (reads and debits).
    pub pool_size: usize,
    /// Most concurrent debits of one client taken in one transaction (1: one statement per
    /// debit, the behaviour before batching).
    pub debit_batch: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            queue_capacity: 8192,
            max_batch: 1024,
            lease_ttl: Duration::from_secs(30),
            timeout: Duration::from_secs(2),
            pool_size: 8,
            debit_batch: batch::MAX_BATCH,
        }
    }
}

/// Whether the database answers; one log line and a gauge change per transition.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    down: AtomicBool,
}

impl Reach {
    pub(crate) fn is_up(&self) -> bool {
        !self.down.load(Ordering::Acquire)
    }

    pub(crate) fn ok(&self) {
        if self.down.swap(false, Ordering::AcqRel) {
            metrics::gauge!(crate::telemetry::STORE_UP).set(1.0);
            tracing::warn!("store: PostgreSQL answers again; held writes are applied and quota-limited clients are served");
        }
    }

    pub(crate) fn failed(&self, err: &StoreError) {
        if !self.down.swap(true, Ordering::AcqRel) {
            metrics::gauge!(crate::telemetry::STORE_UP).set(0.0);
            tracing::error!(error = %err, "store: PostgreSQL is unreachable. Clients without a quota are served; request-log entries are held (bounded) and then dropped and counted; ledger and state writes are held and applied when it answers; quota-limited clients get 503 unless shared.fail_open is set. Check that PostgreSQL runs and is reachable at storage.url.");
        }
    }

    /// Report the outcome of one database call; passes it through.
    pub(crate) fn note<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match &result {
            Ok(_) => self.ok(),
            Err(e) if e.is_unavailable() => self.failed(e),
            Err(_) => {}
        }
        result
    }
}

/// What the PostgreSQL half of a [`Store`] shares between handles, the writer and billing.
pub(crate) struct Remote {
    pub(crate) pool: Pool,
    /// This process's id on lease rows (random per start).
    pub(crate) replica: String,
    pub(crate) lease_ttl: Duration,
    pub(crate) timeout: Duration,
    pub(crate) reach: Reach,
    /// Sessions with a precharge this replica still owns: their leases are renewed until
    /// the writer has committed their settle or refund.
    pub(crate) live: Mutex<HashSet<String>>,
    /// Writes the writer holds because the database did not answer.
    pub(crate) held: AtomicUsize,
    /// Each client's queue of debits waiting for the next batch (`batch.rs`).
    pub(crate) lanes: batch::Lanes,
    /// Debit statements sent (one per batch).
    pub(crate) debit_statements: AtomicU64,
    /// Most debits in one batch.
    pub(crate) debit_batch: usize,
}

impl Remote {
    pub(crate) fn live(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        crate::lock::lock(&self.live)
    }

    /// A pooled connection, within the timeout.
    pub(crate) async fn conn(&self) -> Result<deadpool_postgres::Object, StoreError> {
        use deadpool_postgres::{PoolError, TimeoutType};
        self.pool.get().await.map_err(|e| match e {
            // Every pooled connection is busy: this call fails, the database is not down.
            PoolError::Timeout(TimeoutType::Wait) => {
                StoreError::Busy(format!("no free PostgreSQL connection: {e}"))
            }
            e => StoreError::Unavailable(format!("no PostgreSQL connection: {e}")),
        })
    }

    /// `f` on a pooled connection, bounded by the timeout, its outcome reported to `reach`
    /// (a timeout is not: see below).
    pub(crate) async fn with<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&deadpool_postgres::Object) -> Result<T, StoreError>,
    {
        self.with_mut(async |c: &mut deadpool_postgres::Object| f(c).await)
            .await
    }

    /// [`Remote::with`] for work that needs the connection mutably (a transaction).
    pub(crate) async fn with_mut<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&mut deadpool_postgres::Object) -> Result<T, StoreError>,
    {
        let work = async {
            let mut conn = self.conn().await?;
            f(&mut conn).await
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(r) => self.reach.note(r),
            // A slow statement (a hot row's lock queue) is not an outage: only this call
            // fails. A server that stopped answering is noticed by failed connects and by
            // the writer's batch timeout.
            Err(_) => Err(StoreError::Busy(format!(
                "PostgreSQL did not answer within {:?}",
                self.timeout
            ))),
        }
    }
}

/// Parses `url` for tokio-postgres (without echoing it: it may hold a password).
pub(crate) fn pg_config(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let mut cfg = tokio_postgres::Config::from_str(url).map_err(|e| {
        StoreError::Setup(format!("storage.url is not a usable PostgreSQL URL: {e}"))
    })?;
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(Duration::from_secs(5));
    }
    cfg.keepalives(true);
    cfg.keepalives_idle(Duration::from_secs(30));
    cfg.application_name("switchyard");
    Ok(cfg)
}

fn replica_id() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_default();
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(32)
        .collect();
    format!("{host}-{}-{:08x}", std::process::id(), fastrand::u32(..))
}

impl Store {
    /// Connects to PostgreSQL at `url`, migrates the schema (one replica at a time) and
    /// starts the writer. Fails when the database cannot be reached now.
    pub async fn open_postgres(url: &str, opts: PgOptions) -> Result<Store, StoreError> {
        let cfg = pg_config(url)?;
        schema::migrate(&cfg).await?;
        let mgr = Manager::from_config(
            cfg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(opts.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(opts.timeout))
            .create_timeout(Some(opts.timeout))
            .recycle_timeout(Some(opts.timeout))
            .build()
            .map_err(|e| StoreError::Setup(format!("connection pool: {e}")))?;
        let remote = Arc::new(Remote {
            pool,
            replica: replica_id(),
            lease_ttl: opts.lease_ttl,
            timeout: opts.timeout,
            reach: Reach::default(),
            live: Mutex::default(),
            held: AtomicUsize::new(0),
            lanes: batch::Lanes::default(),
            debit_statements: AtomicU64::new(0),
            debit_batch: opts.debit_batch.max(1),
        });
        metrics::gauge!(crate::telemetry::STORE_UP).set(1.0);
        let (tx, rx) = std::sync::mpsc::sync_channel(opts.queue_capacity.max(1));
        let shared = Arc::new(Shared::default());
        let handle = writer::spawn(cfg, rx, shared.clone(), remote.clone(), &opts)?;
        tracing::info!(replica = %remote.replica, "store: PostgreSQL");
        Ok(Store {
            inner: Arc::new(Inner {
                tx,
                shared,
                writer: Mutex::new(Some(handle)),
                backend: super::Backend::Postgres(remote),
            }),
        })
    }

    /// The shared quota of a PostgreSQL store (`None` for SQLite).
    pub fn quota(&self) -> Option<Quota> {
        self.remote().map(|r| Quota::new(r.clone()))
    }

    pub(crate) fn remote(&self) -> Option<&Arc<Remote>> {
        match &self.inner.backend {
            super::Backend::Postgres(r) => Some(r),
            super::Backend::Sqlite(_) => None,
        }
    }
}

/// True when `e` means the server could not be reached or went away (as opposed to a
/// statement the server refused).
pub(crate) fn unreachable(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    match error.code() {
        None => true,
        Some(c) => {
            *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || c.code().starts_with("08")
        }
    }
}
