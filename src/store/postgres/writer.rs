//! The PostgreSQL writer thread: drains the queue into held writes, commits them in batches
//! on its own connection (a current-thread runtime drives it), and holds them while the
//! database does not answer — request-log entries and affinity snapshots (only a cache) up to
//! the queue capacity, the rest up to [`MAX_HELD`] — dropping and counting beyond, so a long
//! outage never crowds ledger entries out with droppable ones.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use super::super::records::{LedgerKind, WriteOp};
use super::super::sqlite::writer::{linger, next, report_lost, Msg, Shared};
use super::super::{StoreError, STORE_WRITTEN_TOTAL};
use super::apply::{self, Owner, Stmts};
use super::{PgOptions, Remote, MAX_HELD};

/// Longest a batch may take before the connection is given up as unreachable.
const BATCH_TIMEOUT: Duration = Duration::from_secs(30);
/// At shutdown with writes still held, how long to keep trying.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub(crate) fn spawn(
    cfg: tokio_postgres::Config,
    rx: Receiver<Msg>,
    shared: Arc<Shared>,
    remote: Arc<Remote>,
    opts: &PgOptions,
) -> Result<JoinHandle<()>, StoreError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StoreError::Setup(format!("writer runtime: {e}")))?;
    let writer = Writer {
        cfg,
        conn: None,
        held: VecDeque::new(),
        logs: 0,
        log_cap: opts.queue_capacity.max(1),
        max_batch: opts.max_batch.max(1),
        shared,
        remote,
    };
    std::thread::Builder::new()
        .name("switchyard-store-pg".into())
        .spawn(move || writer.run(&rt, &rx))
        .map_err(|e| StoreError::Setup(format!("cannot start writer thread: {e}")))
}

struct Writer {
    cfg: tokio_postgres::Config,
    conn: Option<(Client, Stmts)>,
    held: VecDeque<WriteOp>,
    /// Droppable entries (request log, affinity snapshots) among `held`.
    logs: usize,
    log_cap: usize,
    max_batch: usize,
    shared: Arc<Shared>,
    remote: Arc<Remote>,
}

impl Writer {
    fn run(mut self, rt: &tokio::runtime::Runtime, rx: &Receiver<Msg>) {
        let mut stopping = false;
        loop {
            let mut batch = Vec::with_capacity(64);
            if !stopping {
                match next(rx, !self.held.is_empty()) {
                    Ok(Some(m)) => batch.push(m),
                    Ok(None) => {}
                    Err(()) => break,
                }
            }
            batch.extend(rx.try_iter().take(self.max_batch));
            if !stopping && !batch.is_empty() {
                linger(rx, &mut batch, self.max_batch);
            }
            if batch.is_empty() && stopping {
                break;
            }
            self.shared.queued.fetch_sub(batch.len(), Ordering::Relaxed);
            let mut flushes = Vec::new();
            let mut prunes = Vec::new();
            for m in batch {
                match m {
                    Msg::Shutdown => stopping = true,
                    Msg::MaxPages(_) => {}
                    Msg::Op(WriteOp::Flush(done)) => flushes.push(done),
                    Msg::Op(WriteOp::Prune(p)) => prunes.push(p),
                    Msg::Op(op) => self.hold(op),
                }
            }
            rt.block_on(self.write_held());
            for mut p in prunes {
                if let Some(done) = rt.block_on(self.prune(&p)) {
                    if let Some(tx) = p.done.take() {
                        let _ = tx.send(done);
                    }
                }
            }
            for done in flushes {
                let _ = done.send(());
            }
        }
        self.finish(rt);
    }

    /// Keeps trying the held writes for a little while, then reports the rest lost.
    fn finish(mut self, rt: &tokio::runtime::Runtime) {
        let until = std::time::Instant::now() + SHUTDOWN_GRACE;
        while !self.held.is_empty() && std::time::Instant::now() < until {
            rt.block_on(self.write_held());
            if !self.held.is_empty() {
                std::thread::sleep(Duration::from_millis(250));
            }
        }
        for op in std::mem::take(&mut self.held) {
            report_lost(
                &op,
                &StoreError::Closed,
                "PostgreSQL unreachable at shutdown",
            );
            self.shared.count_dropped(op.kind(), 1);
        }
        tracing::debug!("store writer (PostgreSQL) stopped");
    }

    /// Queues `op` behind what is held, or drops and counts it when its bound is reached.
    fn hold(&mut self, op: WriteOp) {
        let is_log = droppable(&op);
        if is_log && self.logs >= self.log_cap {
            self.shared.count_dropped(op.kind(), 1);
            return;
        }
        if !is_log && self.held.len() - self.logs >= MAX_HELD {
            report_lost(
                &op,
                &StoreError::Closed,
                "PostgreSQL unreachable and too many writes held",
            );
            self.shared.count_dropped(op.kind(), 1);
            self.release(&op);
            return;
        }
        if is_log {
            self.logs += 1;
        }
        self.held.push_back(op);
        self.publish_held();
    }

    fn publish_held(&self) {
        self.remote
            .held
            .store(self.held.len() - self.logs, Ordering::Relaxed);
    }

    /// A terminal ledger entry is settled one way or another: its lease needs no renewal.
    fn release(&self, op: &WriteOp) {
        if let WriteOp::Ledger(e) = op {
            if e.kind != LedgerKind::Precharge {
                self.remote.live().remove(&e.request_id);
            }
        }
    }

    async fn connect(&mut self) -> Result<(), StoreError> {
        if self.conn.as_ref().is_some_and(|(c, _)| !c.is_closed()) {
            return Ok(());
        }
        self.conn = None;
        let (client, conn) = self.cfg.connect(NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "store writer connection ended");
            }
        });
        let stmts = Stmts::prepare(&client).await?;
        self.conn = Some((client, stmts));
        Ok(())
    }

    /// Writes everything held, one batch at a time, until done or the database is gone.
    async fn write_held(&mut self) {
        while !self.held.is_empty() {
            if let Err(e) = self.connect().await {
                self.remote.reach.failed(&as_unavailable(e));
                return;
            }
            let n = self.held.len().min(self.max_batch);
            let chunk: Vec<WriteOp> = self.held.drain(..n).collect();
            let chunk_logs = count_logs(&chunk);
            self.logs -= chunk_logs;
            let result = tokio::time::timeout(BATCH_TIMEOUT, self.commit(&chunk)).await;
            let result = result.unwrap_or_else(|_| {
                Err(StoreError::Unavailable(format!(
                    "a batch took longer than {BATCH_TIMEOUT:?}"
                )))
            });
            match result {
                Ok(applied) => {
                    self.remote.reach.ok();
                    self.done(&chunk, &applied, chunk.len());
                }
                Err(error) => {
                    let error = if error.is_unavailable() {
                        error
                    } else {
                        tracing::warn!(error = %error, ops = chunk.len(), "store batch refused; writing its ops one by one");
                        match self.one_by_one(&chunk).await {
                            Ok(()) => continue,
                            Err(error) => error,
                        }
                    };
                    self.conn = None;
                    self.remote.reach.failed(&error);
                    self.logs += chunk_logs;
                    for op in chunk.into_iter().rev() {
                        self.held.push_front(op);
                    }
                    self.publish_held();
                    return;
                }
            }
        }
        self.publish_held();
    }

    /// One transaction: the other ops pipelined in order, then every request-log entry in
    /// one statement. Returns, per op, whether a ledger entry was applied.
    async fn commit(&mut self, ops: &[WriteOp]) -> Result<Vec<Option<bool>>, StoreError> {
        let owner = Owner {
            replica: &self.remote.replica,
            ttl_ms: i64::try_from(self.remote.lease_ttl.as_millis()).unwrap_or(i64::MAX),
        };
        let (client, stmts) = self.conn.as_mut().ok_or(StoreError::Closed)?;
        let tx = client.transaction().await?;
        let others = ops
            .iter()
            .filter(|op| !matches!(op, WriteOp::RequestLog(_)))
            .map(|op| apply::one(&tx, stmts, &owner, op));
        let results = futures_util::future::join_all(others).await;
        let logs: Vec<_> = ops
            .iter()
            .filter_map(|op| match op {
                WriteOp::RequestLog(r) => Some(r.as_ref()),
                _ => None,
            })
            .collect();
        let mut applied = Vec::with_capacity(results.len());
        for r in results {
            applied.push(r?);
        }
        apply::requests(&tx, stmts, &logs).await?;
        tx.commit().await?;
        Ok(applied)
    }

    /// After a refused batch: each op alone; a refused op is dropped, counted and logged.
    async fn one_by_one(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        let owner = Owner {
            replica: &self.remote.replica,
            ttl_ms: i64::try_from(self.remote.lease_ttl.as_millis()).unwrap_or(i64::MAX),
        };
        let mut applied = Vec::new();
        let mut written = 0;
        for op in ops {
            let (client, stmts) = self.conn.as_ref().ok_or(StoreError::Closed)?;
            match apply::one(client, stmts, &owner, op).await {
                Ok(a) => {
                    written += 1;
                    if !matches!(op, WriteOp::RequestLog(_)) {
                        applied.push(a);
                    }
                }
                Err(e) if e.is_unavailable() => return Err(e),
                Err(e) => {
                    report_lost(op, &e, "row refused by PostgreSQL");
                    self.shared.count_dropped(op.kind(), 1);
                    self.release(op);
                    if !matches!(op, WriteOp::RequestLog(_)) {
                        applied.push(None);
                    }
                }
            }
        }
        self.done(ops, &applied, written);
        Ok(())
    }

    /// Counts a committed batch and releases the leases its terminal entries closed.
    fn done(&mut self, ops: &[WriteOp], applied: &[Option<bool>], written: usize) {
        self.shared
            .written
            .fetch_add(written as u64, Ordering::Relaxed);
        self.shared.batches.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(STORE_WRITTEN_TOTAL).increment(written as u64);
        let others = ops
            .iter()
            .filter(|op| !matches!(op, WriteOp::RequestLog(_)));
        for (op, a) in others.zip(applied) {
            self.release(op);
            if let (WriteOp::Ledger(e), Some(false)) = (op, a) {
                if e.kind != LedgerKind::Precharge {
                    metrics::counter!(crate::telemetry::QUOTA_LEASE_LOST).increment(1);
                    tracing::warn!(session = %e.request_id, client = %e.client, kind = e.kind.as_str(),
                        "terminal ledger entry not applied: the session was already closed (its lease expired and another replica refunded it)");
                }
            }
        }
        self.publish_held();
    }

    async fn prune(&mut self, p: &super::super::Prune) -> Option<super::super::Pruned> {
        if self.connect().await.is_err() {
            return None;
        }
        let (client, _) = self.conn.as_mut()?;
        match super::prune::run(client, p).await {
            Ok(done) => Some(done),
            Err(e) => {
                tracing::warn!(error = %e, "store retention round failed; retried next round");
                None
            }
        }
    }
}

fn droppable(op: &WriteOp) -> bool {
    matches!(
        op,
        WriteOp::RequestLog(_) | WriteOp::AffinityBinding(_) | WriteOp::AffinityBindings(_)
    )
}

fn count_logs(ops: &[WriteOp]) -> usize {
    ops.iter().filter(|op| droppable(op)).count()
}

/// A failed connect is always "unreachable", whatever the driver called it.
fn as_unavailable(error: StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(_) => error,
        other => StoreError::Unavailable(other.to_string()),
    }
}
