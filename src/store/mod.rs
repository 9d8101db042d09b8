//! Persistence: request log (R12.1), billing ledger (R11.2), disabled channel and key states
//! (R7.2), task bindings (R10.5) and affinity bindings, behind one writer thread. SQLite by
//! default (one process); PostgreSQL with `storage.url` for several replicas (R17, `postgres`).
//!
//! # Writing
//! One dedicated `std::thread` owns the write connection. It `recv()`s one op, drains
//! up to `max_batch` more with `try_iter()`, and writes them in one IMMEDIATE
//! transaction. A failed transaction is retried once, then its ops are dropped and
//! counted (ledger losses are logged at error level); a bad row is skipped, never
//! panicked on.
//!
//! * [`Store::try_send`] never blocks and is never awaited: when the bounded queue is
//!   full the op is dropped and counted in `switchyard_store_dropped_total`. Use it for
//!   droppable data (request log, affinity bindings).
//! * Ledger entries, task bindings and disabled/enabled states are NOT droppable: use
//!   [`Store::send_durable`] (blocks while the queue is full: only off the async hot
//!   path), [`Store::send_durable_async`] (a blocking task only when the queue is full)
//!   or [`Store::offer`] (hands the op back when the queue is full).
//! * [`Store::flush`] resolves once everything sent before it is committed.
//! * [`Store::close`] / dropping the last handle writes everything queued and joins.
//!
//! Durability: WAL with `synchronous=NORMAL` — a committed transaction survives a
//! process kill (`kill -9`), not necessarily a power loss.
//!
//! # Ledger sign convention (credits in micro-units)
//! * `Precharge.amount` = the estimate debited before the attempt loop (≥ 0).
//! * `Settle.amount` = actual − estimate, a delta that may be negative. A trusted key
//!   that skipped the precharge settles with the full actual cost.
//! * `Refund.amount` = the precharged amount returned (≥ 0).
//!
//! Net charge of a client = sum(precharge) + sum(settle) − sum(refund); this is
//! [`LedgerTotals::charged`]. At most one entry per (request, kind) and at most one
//! terminal entry (settle *or* refund) per request are stored: replays and a late
//! second terminal entry are ignored (first wins), so a request is never charged twice.
//! A precharge with no terminal entry is reported by [`Store::dangling_precharges`]
//! for refunding at start-up.
//!
//! Reads run on a separate connection inside `tokio::task::spawn_blocking`. For
//! `":memory:"` both connections share one named shared-cache in-memory database.

mod error;
mod fold;
pub mod postgres;
mod reads;
mod records;
pub mod retention;
mod sqlite;

#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;

pub use error::StoreError;
pub use postgres::{Debit, PgOptions, Quota, Swept};
pub use records::{
    AffinityBinding, AttemptRecord, LedgerEntry, LedgerKind, LedgerTotals, Prune, Pruned,
    RequestRecord, StateKey, StateRow, TaskBinding, WriteOp,
};
pub use sqlite::schema::SCHEMA_VERSION;

use sqlite::writer::{Msg, Shared};

/// Counter of ops lost (queue full, store closed, or failed writes). Label `op`.
pub const STORE_DROPPED_TOTAL: &str = crate::telemetry::STORE_DROPPED;
/// Counter of ops committed.
pub const STORE_WRITTEN_TOTAL: &str = crate::telemetry::STORE_WRITTEN;

/// Tunables; `Default` is what production uses.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Bounded queue capacity between the request path and the writer.
    pub queue_capacity: usize,
    /// Most ops written in one transaction.
    pub max_batch: usize,
    /// SQLite busy timeout for both connections.
    pub busy_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            queue_capacity: 8192,
            max_batch: 1024,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// Snapshot of the store's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub written: u64,
    pub dropped: u64,
    pub batches: u64,
    pub queued: usize,
}

/// Where reads go (and which writer runs).
pub(crate) enum Backend {
    Sqlite(Arc<Mutex<Connection>>),
    Postgres(Arc<postgres::Remote>),
}

pub(crate) struct Inner {
    tx: SyncSender<Msg>,
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
    backend: Backend,
}

impl Inner {
    /// Stops the writer after it has written everything queued, and joins it.
    /// Idempotent; later sends are dropped and counted.
    fn shutdown(&self) {
        let handle = crate::lock::lock(&self.writer).take();
        if let Some(handle) = handle {
            self.shared.queued.fetch_add(1, Ordering::Relaxed);
            if self.tx.send(Msg::Shutdown).is_err() {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            }
            if handle.join().is_err() {
                tracing::error!("store writer thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Handle to the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Milliseconds since the Unix epoch.
pub use crate::clock::now_ms;

impl Store {
    /// Opens (creating and migrating) the database at `path`, or `":memory:"`.
    pub fn open(path: &str) -> Result<Store, StoreError> {
        Store::open_with(path, StoreOptions::default())
    }

    pub fn open_with(path: &str, opts: StoreOptions) -> Result<Store, StoreError> {
        let target = sqlite::schema::Target::resolve(path);
        let mut conn = sqlite::schema::connect(&target, opts.busy_timeout)?;
        sqlite::schema::migrate(&mut conn)?;
        // The write connection stays open for the store's lifetime, which also keeps a
        // shared-cache in-memory database alive for the reader.
        let reader = sqlite::schema::connect(&target, opts.busy_timeout)?;
        if target.is_memory() {
            tracing::info!("store is in memory: nothing survives a restart");
        }
        metrics::gauge!(crate::telemetry::STORE_UP).set(1.0);

        let (tx, rx) = mpsc::sync_channel(opts.queue_capacity.max(1));
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let max_batch = opts.max_batch;
        let handle = std::thread::Builder::new()
            .name("switchyard-store".into())
            .spawn(move || sqlite::writer::run(conn, rx, &thread_shared, max_batch))
            .map_err(|e| StoreError::Setup(format!("cannot start writer thread: {e}")))?;

        Ok(Store {
            inner: Arc::new(Inner {
                tx,
                shared,
                writer: Mutex::new(Some(handle)),
                backend: Backend::Sqlite(Arc::new(Mutex::new(reader))),
            }),
        })
    }

    /// Queues `op` without blocking; returns `false` (and counts it dropped) when the
    /// queue is full or the store is closed. Never use it for ledger entries.
    pub fn try_send(&self, op: impl Into<WriteOp>) -> bool {
        let op = op.into();
        let shared = &self.inner.shared;
        shared.queued.fetch_add(1, Ordering::Relaxed);
        match self.inner.tx.try_send(Msg::Op(op)) {
            Ok(()) => true,
            Err(TrySendError::Full(msg) | TrySendError::Disconnected(msg)) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                if let Msg::Op(op) = msg {
                    if let WriteOp::Ledger(e) = &op {
                        tracing::error!(request_id = %e.request_id, kind = e.kind.as_str(),
                            "ledger entry dropped: use send_durable for ledger entries");
                    }
                    shared.count_dropped(op.kind(), 1);
                }
                false
            }
        }
    }

    /// Queues `op`, blocking the calling thread while the queue is full. Only for use
    /// off the async hot path (start-up, shutdown, `spawn_blocking`). Fails only when
    /// the store is closed (the op is then counted dropped).
    pub fn send_durable(&self, op: impl Into<WriteOp>) -> Result<(), StoreError> {
        let op = op.into();
        let shared = &self.inner.shared;
        shared.queued.fetch_add(1, Ordering::Relaxed);
        match self.inner.tx.send(Msg::Op(op)) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError(msg)) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                if let Msg::Op(op) = msg {
                    sqlite::writer::report_closed(&op);
                    shared.count_dropped(op.kind(), 1);
                }
                Err(StoreError::Closed)
            }
        }
    }

    /// Queues `op` if the queue has room right now, in order with the caller's other sends.
    /// A full queue hands the op back (the caller chooses how to wait for room); a closed
    /// store counts it dropped and returns `None`.
    pub fn offer(&self, op: impl Into<WriteOp>) -> Option<WriteOp> {
        let op = op.into();
        let shared = &self.inner.shared;
        shared.queued.fetch_add(1, Ordering::Relaxed);
        match self.inner.tx.try_send(Msg::Op(op)) {
            Ok(()) => None,
            Err(TrySendError::Full(Msg::Op(op))) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                Some(op)
            }
            Err(TrySendError::Full(msg) | TrySendError::Disconnected(msg)) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                if let Msg::Op(op) = msg {
                    sqlite::writer::report_closed(&op);
                    shared.count_dropped(op.kind(), 1);
                }
                None
            }
        }
    }

    /// Like [`Store::send_durable`] from async code: queues immediately when there is
    /// room, otherwise waits on a blocking task — never blocks a runtime worker.
    pub async fn send_durable_async(&self, op: impl Into<WriteOp>) -> Result<(), StoreError> {
        let op = op.into();
        let shared = &self.inner.shared;
        shared.queued.fetch_add(1, Ordering::Relaxed);
        match self.inner.tx.try_send(Msg::Op(op)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(Msg::Op(op))) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                let store = self.clone();
                tokio::task::spawn_blocking(move || store.send_durable(op))
                    .await
                    .map_err(|e| StoreError::Task(e.to_string()))?
            }
            Err(TrySendError::Full(msg) | TrySendError::Disconnected(msg)) => {
                shared.queued.fetch_sub(1, Ordering::Relaxed);
                if let Msg::Op(op) = msg {
                    sqlite::writer::report_closed(&op);
                    shared.count_dropped(op.kind(), 1);
                }
                Err(StoreError::Closed)
            }
        }
    }

    /// Resolves once every op sent before this call is committed (or dropped).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (done, wait) = oneshot::channel();
        self.send_durable_async(WriteOp::Flush(done)).await?;
        wait.await.map_err(|_| StoreError::Closed)
    }

    /// One retention round (see `store::prune`), run by the writer after what is queued.
    /// `None` when the store is closed or the round failed.
    pub async fn prune(
        &self,
        before_ms: Option<i64>,
        keep_rows: Option<u64>,
        batch: usize,
        ledger_cursor: i64,
    ) -> Option<Pruned> {
        let (done, wait) = oneshot::channel();
        let op = WriteOp::Prune(Prune {
            before_ms,
            keep_rows,
            batch: batch.max(1),
            ledger_cursor,
            done: Some(done),
        });
        self.send_durable_async(op).await.ok()?;
        wait.await.ok()
    }

    /// False while the database cannot be reached (PostgreSQL down); SQLite is always up.
    pub fn is_up(&self) -> bool {
        self.remote().is_none_or(|remote| remote.reach.is_up())
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        match self.inner.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// True while the database cannot grow (disk full): the last write failed for lack of
    /// space and none has succeeded since. Quota-limited clients are refused meanwhile.
    pub fn is_full(&self) -> bool {
        self.inner.shared.full.load(Ordering::Acquire)
    }

    /// Cap the database at `pages` pages (SQLite `max_page_count`): writes beyond fail as on
    /// a full disk. For drills and tests of the full-disk behaviour.
    pub fn cap_pages(&self, pages: u64) {
        self.inner.shared.queued.fetch_add(1, Ordering::Relaxed);
        if self.inner.tx.send(Msg::MaxPages(pages)).is_err() {
            self.inner.shared.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Ops lost so far (queue full, closed, failed writes).
    pub fn dropped(&self) -> u64 {
        self.inner.shared.dropped.load(Ordering::Relaxed)
    }

    /// Ops waiting in the queue (approximate).
    pub fn queue_len(&self) -> usize {
        self.inner.shared.queued.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> StoreStats {
        let shared = &self.inner.shared;
        StoreStats {
            written: shared.written.load(Ordering::Relaxed),
            dropped: shared.dropped.load(Ordering::Relaxed),
            batches: shared.batches.load(Ordering::Relaxed),
            queued: shared.queued.load(Ordering::Relaxed),
        }
    }

    /// Writes everything queued, stops the writer and joins it (blocking). Other
    /// clones stay usable for reads; their sends are dropped and counted.
    pub fn close(self) {
        self.inner.shutdown();
    }

    /// [`Store::close`] without blocking a runtime worker.
    pub async fn shutdown(self) -> Result<(), StoreError> {
        tokio::task::spawn_blocking(move || self.close())
            .await
            .map_err(|e| StoreError::Task(e.to_string()))
    }
}
