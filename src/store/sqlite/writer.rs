//! The store's single writer thread: drains the queue into batched transactions.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use rusqlite::{params, CachedStatement, Connection, Transaction, TransactionBehavior};

use super::super::records::{
    AffinityBinding, LedgerEntry, Prune, RequestRecord, StateKey, StateRow, WriteOp,
};
use super::super::{StoreError, STORE_DROPPED_TOTAL, STORE_WRITTEN_TOTAL};
use super::batch_fold;
use super::prune::add_to_compacted;
use super::space::{drop_request_logs, hold, is_full, Space, HELD_RETRY};

/// Pause before the single retry of a failed transaction.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How long the writer keeps collecting after the first op of a batch, so that a busy
/// gateway commits a few dozen rows per transaction instead of one or two (each commit
/// rewrites the touched pages into the WAL). A batch that holds a flush or the shutdown
/// signal does not wait; one that arrives during the wait is answered after it.
const LINGER: Duration = Duration::from_millis(20);

/// What travels on the queue: public ops plus the internal control messages.
pub(crate) enum Msg {
    Op(WriteOp),
    Shutdown,
    /// Cap the database at this many pages (SQLite `max_page_count`).
    MaxPages(u64),
}

/// Counters shared between the handles and the writer thread.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) dropped: AtomicU64,
    pub(crate) written: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) queued: AtomicUsize,
    /// The last write failed for lack of space and none has succeeded since.
    pub(crate) full: AtomicBool,
}

impl Shared {
    /// Counts lost ops; a lost `Flush` or `Prune` is not data and is not counted.
    pub(crate) fn count_dropped(&self, kind: &'static str, n: u64) {
        if kind == "flush" || kind == "prune" {
            return;
        }
        self.dropped.fetch_add(n, Ordering::Relaxed);
        metrics::counter!(STORE_DROPPED_TOTAL, "op" => kind).increment(n);
    }
}

/// The next message: blocks, or waits at most `HELD_RETRY` while writes are held.
/// `Err(())` when every sender is gone.
pub(crate) fn next(rx: &Receiver<Msg>, holding: bool) -> Result<Option<Msg>, ()> {
    if !holding {
        return rx.recv().map(Some).map_err(|_| ());
    }
    match rx.recv_timeout(HELD_RETRY) {
        Ok(m) => Ok(Some(m)),
        Err(RecvTimeoutError::Timeout) => Ok(None),
        Err(RecvTimeoutError::Disconnected) => Err(()),
    }
}

/// Writer loop: `recv()` one message, drain up to `max_batch` with `try_iter()`, write
/// them in one transaction, then run the retention rounds and answer the flushes of that
/// batch. Ends on `Shutdown` (after writing everything already queued) or when every
/// sender is gone. Writes that failed for lack of space are held and retried first.
pub(crate) fn run(mut conn: Connection, rx: Receiver<Msg>, shared: &Shared, max_batch: usize) {
    let max_batch = max_batch.max(1);
    let mut stopping = false;
    let mut held: Vec<WriteOp> = Vec::new();
    let mut space = Space::default();
    loop {
        let mut batch = Vec::with_capacity(64);
        if !stopping {
            match next(&rx, !held.is_empty()) {
                Ok(Some(m)) => batch.push(m),
                Ok(None) => {}
                Err(()) => break,
            }
        }
        let room = max_batch - batch.len();
        batch.extend(rx.try_iter().take(room));
        if !stopping && !batch.is_empty() {
            linger(&rx, &mut batch, max_batch);
        }
        if batch.is_empty() && stopping {
            break; // stopping and fully drained
        }
        shared.queued.fetch_sub(batch.len(), Ordering::Relaxed);

        let mut ops = std::mem::take(&mut held);
        let mut flushes = Vec::new();
        let mut prunes = Vec::new();
        for m in batch {
            match m {
                Msg::Shutdown => stopping = true,
                Msg::MaxPages(n) => {
                    if let Err(e) = conn.pragma_update(None, "max_page_count", n) {
                        tracing::warn!(error = %e, "max_page_count not set");
                    }
                }
                Msg::Op(WriteOp::Flush(done)) => flushes.push(done),
                Msg::Op(WriteOp::Prune(p)) => prunes.push(p),
                Msg::Op(op) => ops.push(op),
            }
        }
        let degraded = space.degraded();
        if degraded {
            ops = drop_request_logs(ops, shared);
        }
        if !ops.is_empty() {
            match commit_batch(&mut conn, &ops, shared) {
                Ok(()) if !degraded => {
                    space.failed_at = None;
                    shared.set_full(false, None);
                }
                Ok(()) => {}
                Err(err) => {
                    space.failed_at = Some(std::time::Instant::now());
                    shared.set_full(true, Some(&err));
                    held = hold(ops, shared);
                }
            }
        }
        for p in prunes {
            prune(&mut conn, p);
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
    for op in &held {
        report_lost(op, &StoreError::Closed, "disk still full at shutdown");
        shared.count_dropped(op.kind(), 1);
    }
    tracing::debug!("store writer stopped");
}

fn prune(conn: &mut Connection, mut p: Prune) {
    match super::prune::run(conn, &p) {
        Ok(done) => {
            if let Some(tx) = p.done.take() {
                let _ = tx.send(done);
            }
        }
        Err(e) => tracing::warn!(error = %e, "store retention round failed; retried next round"),
    }
}

/// Sleeps out `LINGER` (unless the batch already holds a flush or the shutdown signal),
/// then drains what arrived meanwhile. Sleeping rather than blocking in `recv` means the
/// request path's sends do not each pay a futex wake-up of this thread.
pub(crate) fn linger(rx: &Receiver<Msg>, batch: &mut Vec<Msg>, max_batch: usize) {
    let urgent = |m: &Msg| matches!(m, Msg::Shutdown | Msg::Op(WriteOp::Flush(_)));
    if batch.len() >= max_batch || batch.iter().any(urgent) {
        return;
    }
    std::thread::sleep(LINGER);
    let room = max_batch - batch.len();
    batch.extend(rx.try_iter().take(room));
}

/// Writes one batch; on a failed transaction retries once, then drops and counts it.
/// `Err` when the disk is full: nothing was written, and the caller holds the batch.
fn commit_batch(conn: &mut Connection, ops: &[WriteOp], shared: &Shared) -> Result<(), StoreError> {
    for attempt in 0..2 {
        match write_once(conn, ops) {
            Ok(rejected) => {
                let written = (ops.len() - rejected.len()) as u64;
                shared.written.fetch_add(written, Ordering::Relaxed);
                shared.batches.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(STORE_WRITTEN_TOTAL).increment(written);
                for (i, err) in rejected {
                    report_lost(&ops[i], &err, "row rejected");
                    shared.count_dropped(ops[i].kind(), 1);
                }
                return Ok(());
            }
            Err(err) if is_full(&err) => return Err(err),
            Err(err) if attempt == 0 => {
                tracing::warn!(error = %err, ops = ops.len(), "store transaction failed, retrying once");
                std::thread::sleep(RETRY_PAUSE);
            }
            Err(err) => {
                for op in ops {
                    report_lost(op, &err, "transaction failed twice");
                    shared.count_dropped(op.kind(), 1);
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn report_lost(op: &WriteOp, err: &StoreError, why: &'static str) {
    match op {
        WriteOp::Ledger(e) => tracing::error!(
            error = %err, request_id = %e.request_id, client = %e.client,
            kind = e.kind.as_str(), amount = e.amount, "ledger entry lost: {why}"
        ),
        other => tracing::warn!(error = %err, op = other.kind(), "store op dropped: {why}"),
    }
}

/// One transaction over the batch. A row-level failure skips that op (returned with its
/// index); a failure that ends the transaction fails the whole batch so that nothing is
/// half-applied and a retry cannot duplicate rows.
fn write_once(
    conn: &mut Connection,
    ops: &[WriteOp],
) -> Result<Vec<(usize, StoreError)>, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut rejected = Vec::new();
    // The two hot statements are fetched from the cache once per batch, not once per row.
    let mut hot = Hot::default();
    let fold = batch_fold::plan(ops);
    for (i, op) in ops.iter().enumerate() {
        if fold.skips(i) {
            continue;
        }
        if let Err(err) = apply(&tx, &mut hot, op) {
            if tx.is_autocommit() || is_full(&err) {
                // SQLite rolled the whole transaction back (I/O error, ...), or the disk is
                // full: nothing of the batch is kept, and the caller holds what matters.
                return Err(err);
            }
            rejected.push((i, err));
        }
    }
    drop(hot);
    // A failure here fails the batch: the folded sessions are in no row yet.
    for (client, totals) in &fold.totals {
        add_to_compacted(&tx, client, totals)?;
    }
    tx.commit()?;
    Ok(rejected)
}

/// The request-log and ledger inserts of one batch, prepared on first use.
#[derive(Default)]
struct Hot<'c> {
    request: Option<CachedStatement<'c>>,
    ledger: Option<CachedStatement<'c>>,
}

fn cached<'c, 's>(
    tx: &'c Transaction<'_>,
    slot: &'s mut Option<CachedStatement<'c>>,
    sql: &str,
) -> Result<&'s mut CachedStatement<'c>, StoreError> {
    if slot.is_none() {
        *slot = Some(tx.prepare_cached(sql)?);
    }
    slot.as_mut().ok_or(StoreError::Closed)
}

fn apply<'c>(tx: &'c Transaction<'_>, hot: &mut Hot<'c>, op: &WriteOp) -> Result<(), StoreError> {
    match op {
        WriteOp::RequestLog(r) => insert_request(cached(tx, &mut hot.request, INSERT_REQUEST)?, r),
        WriteOp::Ledger(e) => insert_ledger(cached(tx, &mut hot.ledger, INSERT_LEDGER)?, e),
        WriteOp::StateRow(s) => upsert_channel_state(tx, s),
        WriteOp::TaskBinding(t) => {
            tx.prepare_cached(
                "INSERT INTO task_binding (client, task_id, channel, ts_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(client, task_id, channel) DO UPDATE SET ts_ms = excluded.ts_ms",
            )?
            .execute(params![t.client, t.task_id, t.channel, t.ts_ms])?;
            Ok(())
        }
        WriteOp::AffinityBinding(a) => upsert_affinity(tx, a),
        WriteOp::AffinityBindings(list) => list.iter().try_for_each(|a| upsert_affinity(tx, a)),
        WriteOp::Flush(_) | WriteOp::Prune(_) => Ok(()),
    }
}

/// Saturating u64 → SQLite INTEGER.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

const INSERT_REQUEST: &str = "INSERT INTO request_log (id, ts_ms, client, grp, public_model,
    upstream_model, path, stream, attempts, chain, final_status, error_code, sticky_kind,
    sticky_hit, fallback, prompt_tokens, completion_tokens, cached_tokens, usage_estimated,
    stream_outcome, latency_ms, trace_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
    ?19, ?20, ?21, ?22)";

thread_local! {
    /// The `attempts` JSON of the row being inserted: one buffer for the writer thread's
    /// life (SQLite copies a bound text), not a new string per row.
    static ATTEMPTS_JSON: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn insert_request(st: &mut CachedStatement<'_>, record: &RequestRecord) -> Result<(), StoreError> {
    ATTEMPTS_JSON.with_borrow_mut(|buf| {
        buf.clear();
        serde_json::to_writer(&mut *buf, &record.attempts)?;
        // serde_json writes UTF-8; the check is a scan, never a failure.
        let attempts = std::str::from_utf8(buf).unwrap_or("[]");
        insert_row(st, record, attempts)
    })
}

fn insert_row(
    st: &mut CachedStatement<'_>,
    record: &RequestRecord,
    attempts: &str,
) -> Result<(), StoreError> {
    st.execute(params![
        record.id,
        record.ts_ms,
        record.client,
        record.group,
        record.public_model,
        record.upstream_model,
        record.path,
        record.stream,
        attempts,
        record.chain,
        record.final_status,
        record.error_code,
        record.sticky_kind,
        record.sticky_hit,
        record.fallback,
        to_i64(record.prompt_tokens),
        to_i64(record.completion_tokens),
        to_i64(record.cached_tokens),
        record.usage_estimated,
        record.stream_outcome,
        to_i64(record.latency_ms),
        record.trace_id,
    ])?;
    Ok(())
}

/// `INSERT OR IGNORE`: a replayed entry of the same kind, or a second terminal entry
/// (settle after refund or the reverse), is ignored — the first one wins.
const INSERT_LEDGER: &str = "INSERT OR IGNORE INTO ledger (request_id, client, kind, amount, ts_ms)
    VALUES (?1, ?2, ?3, ?4, ?5)";

fn insert_ledger(st: &mut CachedStatement<'_>, entry: &LedgerEntry) -> Result<(), StoreError> {
    let rows = st.execute(params![
        entry.request_id,
        entry.client,
        entry.kind.as_str(),
        entry.amount,
        entry.ts_ms
    ])?;
    if rows == 0 {
        tracing::debug!(request_id = %entry.request_id, kind = entry.kind.as_str(), "duplicate ledger entry ignored");
    }
    Ok(())
}

/// The `key_fp` column of a state row: `''` for the whole channel, the key's fingerprint,
/// or `#<n>` for a row stored by key position before schema v4.
pub(crate) fn key_column(key: &StateKey) -> String {
    match key {
        StateKey::Channel => String::new(),
        StateKey::Key(fp) => fp.clone(),
        StateKey::LegacyIndex(n) => format!("#{n}"),
    }
}

fn upsert_channel_state(tx: &Transaction<'_>, row: &StateRow) -> Result<(), StoreError> {
    let key = key_column(&row.key);
    if row.disabled {
        tx.prepare_cached(
            "INSERT INTO channel_state (channel, key_fp, reason, ts_ms, auto) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(channel, key_fp) DO UPDATE SET reason = excluded.reason, ts_ms = excluded.ts_ms, auto = excluded.auto",
        )?
        .execute(params![row.channel, key, row.reason, row.ts_ms, row.auto])?;
    } else {
        tx.prepare_cached("DELETE FROM channel_state WHERE channel = ?1 AND key_fp = ?2")?
            .execute(params![row.channel, key])?;
    }
    Ok(())
}

fn upsert_affinity(tx: &Transaction<'_>, binding: &AffinityBinding) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO affinity_binding (key, channel, expires_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT(key) DO UPDATE SET channel = excluded.channel, expires_ms = excluded.expires_ms",
    )?
    .execute(params![binding.key, binding.channel, binding.expires_ms])?;
    Ok(())
}

/// Logs an op refused because the writer has stopped.
pub(crate) fn report_closed(op: &WriteOp) {
    report_lost(op, &StoreError::Closed, "store closed");
}
