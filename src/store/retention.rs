//! The retention task (B-retention): keeps the request log within
//! `storage.request_log.max_age` / `max_rows` and folds old, closed ledger sessions into
//! their client's totals. Each round is one small transaction on the writer thread (at most
//! [`BATCH`] rows per table), queued like any write, so pruning never touches the request
//! path and a large backlog is worked off in steps that leave room for live writes.

use std::time::Duration;

use tokio::sync::watch;

use super::{now_ms, Store};

/// Rows per table per round.
pub const BATCH: usize = 1000;
/// Pause between rounds while there is a backlog.
pub const BETWEEN: Duration = Duration::from_millis(20);
/// Pause once nothing is left to prune.
pub const IDLE: Duration = Duration::from_secs(5);

/// The limits, read again before every round (they change on reload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Zero: kept forever.
    pub max_age: Duration,
    /// Zero: no limit.
    pub max_rows: u64,
}

/// Run until `stop` turns true.
pub async fn run(
    store: Store,
    limits: impl Fn() -> Retention + Send + 'static,
    mut stop: watch::Receiver<bool>,
) {
    let mut cursor = 0;
    loop {
        let limits_now = limits();
        let before = (!limits_now.max_age.is_zero()).then(|| {
            now_ms()
                .saturating_sub(i64::try_from(limits_now.max_age.as_millis()).unwrap_or(i64::MAX))
        });
        let keep = (limits_now.max_rows > 0).then_some(limits_now.max_rows);
        let mut pause = IDLE;
        if before.is_some() || keep.is_some() {
            if let Some(p) = store.prune(before, keep, BATCH, cursor).await {
                metrics::counter!(crate::telemetry::STORE_PRUNED, "table" => "request_log")
                    .increment(p.request_log);
                metrics::counter!(crate::telemetry::STORE_PRUNED, "table" => "ledger")
                    .increment(p.ledger);
                if p.request_log > 0 || p.ledger > 0 {
                    tracing::debug!(
                        request_log = p.request_log,
                        ledger = p.ledger,
                        "retention round"
                    );
                }
                cursor = if p.more { p.ledger_cursor } else { 0 };
                if p.more {
                    pause = BETWEEN;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            limits_now = stop.changed() => if limits_now.is_err() || *stop.borrow() { return },
        }
    }
}
