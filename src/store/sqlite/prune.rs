//! Retention (B-retention), run by the writer thread in its own small transactions:
//! the oldest request-log rows beyond `max_rows` or older than `max_age` are deleted, at
//! most `batch` per transaction; ledger rows older than `max_age` whose session is closed
//! (settled or refunded) are folded into `ledger_compacted` and then deleted, so a
//! client's totals — and so its balance — never change.
//!
//! Rows are visited in rowid order, which is the order they were written: no index on
//! time is needed (the request log lost its `ts_ms` index in v3 to keep inserts cheap).

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::super::fold::{Fold, Row, Totals};
use super::super::records::{Prune, Pruned};
use super::super::StoreError;

/// Request-log rows deleted: first beyond the row cap, then by age.
fn request_log(tx: &rusqlite::Transaction<'_>, prune: &Prune) -> Result<u64, StoreError> {
    let batch = i64::try_from(prune.batch).unwrap_or(i64::MAX);
    let mut deleted = 0;
    if let Some(keep) = prune.keep_rows {
        let newest: Option<i64> =
            tx.query_row("SELECT MAX(seq) FROM request_log", [], |row| row.get(0))?;
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        if let Some(upto) = newest.map(|n| n.saturating_sub(keep)) {
            deleted += tx
                .prepare_cached(
                    "DELETE FROM request_log WHERE seq IN
                     (SELECT seq FROM request_log WHERE seq <= ?1 ORDER BY seq LIMIT ?2)",
                )?
                .execute(params![upto, batch])? as u64;
        }
    }
    let left = batch.saturating_sub(deleted as i64);
    if let (Some(before), true) = (prune.before_ms, left > 0) {
        deleted += tx
            .prepare_cached(
                "DELETE FROM request_log WHERE seq IN
                 (SELECT seq FROM (SELECT seq, ts_ms FROM request_log ORDER BY seq LIMIT ?2)
                  WHERE ts_ms < ?1)",
            )?
            .execute(params![before, left])? as u64;
    }
    Ok(deleted)
}

/// Ledger rows folded into `ledger_compacted` (the shared [`Fold`]); returns (rows, next
/// cursor, reached the end of what is old enough).
fn ledger(
    tx: &rusqlite::Transaction<'_>,
    before: i64,
    cursor: i64,
    batch: usize,
) -> Result<(u64, i64, bool), StoreError> {
    let mut rows = Vec::with_capacity(batch);
    {
        let mut st = tx.prepare_cached(
            "SELECT rowid, request_id, client, kind, amount, ts_ms FROM ledger
             WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        )?;
        let mut results = st.query(params![cursor, i64::try_from(batch).unwrap_or(i64::MAX)])?;
        while let Some(r) = results.next()? {
            let row: (i64, String, String, String, i64, i64) = (
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            );
            rows.push(row);
        }
    }
    let full = rows.len() == batch;
    let mut fold = Fold::new(before, cursor);
    for (id, request_id, client, kind, amount, ts_ms) in &rows {
        // A precharge is closed once its session has a settle or refund; start-up recovery
        // needs an open one.
        let closed = kind != "precharge"
            || !fold.is_old(*ts_ms)
            || tx
                .prepare_cached(
                    "SELECT 1 FROM ledger WHERE request_id = ?1 AND kind <> 'precharge' LIMIT 1",
                )?
                .query_row([request_id], |_| Ok(()))
                .optional()?
                .is_some();
        let row = Row {
            id: *id,
            client,
            kind,
            amount: *amount,
            ts_ms: *ts_ms,
            closed,
        };
        if !fold.offer(row) {
            break;
        }
    }
    for id in &fold.gone {
        tx.prepare_cached("DELETE FROM ledger WHERE rowid = ?1")?
            .execute([id])?;
    }
    for (client, totals) in &fold.totals {
        add_to_compacted(tx, client, totals)?;
    }
    Ok((fold.gone.len() as u64, fold.next, fold.reached || !full))
}

/// Adds `totals` to `client`'s row of `ledger_compacted` (retention's fold, and the
/// writer's `batch_fold`).
pub(crate) fn add_to_compacted(
    tx: &rusqlite::Transaction<'_>,
    client: &str,
    totals: &Totals,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO ledger_compacted (client, charged, refunded, entries, through_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(client) DO UPDATE SET charged = charged + excluded.charged,
            refunded = refunded + excluded.refunded, entries = entries + excluded.entries,
            through_ms = MAX(through_ms, excluded.through_ms)",
    )?
    .execute(params![
        client,
        totals.charged,
        totals.refunded,
        totals.entries,
        totals.through_ms
    ])?;
    Ok(())
}

/// One round: one transaction, at most `batch` request-log rows and `batch` ledger rows.
pub(crate) fn run(conn: &mut Connection, prune: &Prune) -> Result<Pruned, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let request_log = request_log(&tx, prune)?;
    let (ledger, cursor, ledger_done) = match prune.before_ms {
        Some(before) => ledger(&tx, before, prune.ledger_cursor, prune.batch)?,
        None => (0, prune.ledger_cursor, true),
    };
    tx.commit()?;
    Ok(Pruned {
        request_log,
        ledger,
        ledger_cursor: cursor,
        more: request_log as usize >= prune.batch || !ledger_done,
    })
}
