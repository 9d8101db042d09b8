//! The store on a full disk (B-retention): request-log entries are dropped and
//! counted, ledger and state writes are held in memory and retried, and one log line and the
//! `switchyard_store_disk_full` gauge mark entering and leaving the state.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::super::records::WriteOp;
use super::super::StoreError;
use super::writer::{report_lost, Shared};

/// Writes held while the disk is full, at most this many (beyond, they are dropped and counted).
pub(crate) const MAX_HELD: usize = 100_000;
/// While writes are held, retry this often even when nothing new arrives.
pub(crate) const HELD_RETRY: Duration = Duration::from_secs(1);
/// After a write failed for lack of space, request-log entries are not even tried for this
/// long (the little space left goes to the ledger); then one batch tries them again, and
/// its success ends the full state. A disk at its limit does not flap the state per write.
pub(crate) const FULL_HOLD: Duration = Duration::from_secs(2);

/// When the last write failed for lack of space (`None`: it did not).
#[derive(Default)]
pub(crate) struct Space {
    pub(crate) failed_at: Option<std::time::Instant>,
}

impl Space {
    /// Request-log entries are dropped without being tried.
    pub(crate) fn degraded(&self) -> bool {
        self.failed_at.is_some_and(|t| t.elapsed() < FULL_HOLD)
    }
}

/// SQLite said the disk (or the page cap) is full.
pub(crate) fn is_full(error: &StoreError) -> bool {
    matches!(error, StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
        if f.code == rusqlite::ErrorCode::DiskFull)
}

/// Request-log entries dropped and counted (the disk is full).
pub(crate) fn drop_request_logs(ops: Vec<WriteOp>, shared: &Shared) -> Vec<WriteOp> {
    let (logs, rest): (Vec<WriteOp>, Vec<WriteOp>) = ops
        .into_iter()
        .partition(|op| matches!(op, WriteOp::RequestLog(_)));
    if !logs.is_empty() {
        shared.count_dropped("request_log", logs.len() as u64);
    }
    rest
}

/// The full-disk split: request-log entries and affinity snapshots (only a cache) dropped
/// and counted, the rest held (up to `MAX_HELD`; beyond, dropped, counted and logged).
pub(crate) fn hold(ops: Vec<WriteOp>, shared: &Shared) -> Vec<WriteOp> {
    let mut held = Vec::new();
    for op in drop_request_logs(ops, shared) {
        if matches!(
            op,
            WriteOp::AffinityBinding(_) | WriteOp::AffinityBindings(_)
        ) {
            shared.count_dropped(op.kind(), 1);
        } else if held.len() >= MAX_HELD {
            report_lost(
                &op,
                &StoreError::Closed,
                "disk full and too many writes held",
            );
            shared.count_dropped(op.kind(), 1);
        } else {
            held.push(op);
        }
    }
    held
}

impl Shared {
    /// Enter or leave the full-disk state, with one log line at each change.
    pub(crate) fn set_full(&self, full: bool, why: Option<&StoreError>) {
        if self.full.swap(full, Ordering::AcqRel) == full {
            return;
        }
        metrics::gauge!(crate::telemetry::STORE_DISK_FULL).set(if full { 1.0 } else { 0.0 });
        if full {
            tracing::error!(error = ?why.map(ToString::to_string),
                "store: no space left for the database. Request-log entries are dropped and counted (switchyard_store_dropped_total{{op=\"request_log\"}}); ledger and state writes are held in memory and retried; clients with a quota get 503 until space is freed. Free disk space (or lower storage.request_log retention) to resume.");
        } else {
            tracing::warn!("store: the database can be written again; held writes are committed and quota-limited clients are served");
        }
    }
}
