//! Retention in PostgreSQL (`storage.request_log.*`), one small transaction per round like
//! SQLite's: the oldest request-log rows beyond `max_rows` or older than `max_age`, and old
//! ledger rows of closed sessions folded into `ledger_compacted`. Every replica runs rounds;
//! the ledger fold takes a transaction advisory lock, so one replica folds at a time.

use std::collections::HashMap;

use tokio_postgres::Client;

use super::super::records::{Prune, Pruned};
use super::super::StoreError;

/// Advisory lock key of the ledger fold ("sy-fold").
const FOLD_LOCK: i64 = 0x0073_792d_666f_6c64;

pub(crate) async fn run(client: &mut Client, prune: &Prune) -> Result<Pruned, StoreError> {
    let batch = i64::try_from(prune.batch).unwrap_or(i64::MAX);
    let tx = client.transaction().await?;
    let mut request_log = 0;
    if let Some(keep) = prune.keep_rows {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        request_log += tx
            .execute(
                "DELETE FROM request_log WHERE seq IN (
                    SELECT seq FROM request_log
                    WHERE seq <= (SELECT MAX(seq) FROM request_log) - $1::bigint
                    ORDER BY seq LIMIT $2::bigint)",
                &[&keep, &batch],
            )
            .await?;
    }
    let left = batch.saturating_sub(i64::try_from(request_log).unwrap_or(i64::MAX));
    if let (Some(before), true) = (prune.before_ms, left > 0) {
        request_log += tx
            .execute(
                "DELETE FROM request_log WHERE seq IN (
                    SELECT seq FROM (SELECT seq, ts_ms FROM request_log ORDER BY seq LIMIT $2::bigint) w
                    WHERE ts_ms < $1::bigint)",
                &[&before, &left],
            )
            .await?;
    }
    let (ledger, cursor, ledger_done) = match prune.before_ms {
        Some(before) => fold(&tx, before, prune.ledger_cursor, batch).await?,
        None => (0, prune.ledger_cursor, true),
    };
    tx.commit().await?;
    Ok(Pruned {
        request_log,
        ledger,
        ledger_cursor: cursor,
        more: request_log >= prune.batch as u64 || !ledger_done,
    })
}

#[derive(Default)]
struct Folded {
    charged: i64,
    refunded: i64,
    entries: i64,
    through_ms: i64,
}

/// Folds the old, closed ledger rows of the next window after `cursor`; returns (rows,
/// next cursor, reached what is not old enough).
async fn fold(
    tx: &tokio_postgres::Transaction<'_>,
    before: i64,
    cursor: i64,
    batch: i64,
) -> Result<(u64, i64, bool), StoreError> {
    let locked: bool = tx
        .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&FOLD_LOCK])
        .await?
        .get(0);
    if !locked {
        return Ok((0, cursor, true)); // another replica is folding
    }
    let rows = tx
        .query(
            "SELECT l.seq, l.client, l.kind, l.amount, l.ts_ms,
                    l.kind <> 'precharge' OR EXISTS (SELECT 1 FROM ledger t
                        WHERE t.request_id = l.request_id AND t.kind <> 'precharge')
             FROM ledger l WHERE l.seq > $1::bigint ORDER BY l.seq LIMIT $2::bigint",
            &[&cursor, &batch],
        )
        .await?;
    let full = rows.len() as i64 == batch;
    let mut next = cursor;
    let mut folded: HashMap<String, Folded> = HashMap::new();
    let mut gone: Vec<i64> = Vec::new();
    let mut reached = !full;
    for row in &rows {
        let (seq, client, kind, amount, ts, closed): (i64, String, String, i64, i64, bool) = (
            row.get(0),
            row.get(1),
            row.get(2),
            row.get(3),
            row.get(4),
            row.get(5),
        );
        if ts >= before {
            reached = true;
            break;
        }
        next = seq;
        if !closed {
            continue; // still open: its lease decides
        }
        let totals = folded.entry(client).or_default();
        if kind == "refund" {
            totals.charged = totals.charged.saturating_sub(amount);
            totals.refunded = totals.refunded.saturating_add(amount);
        } else {
            totals.charged = totals.charged.saturating_add(amount);
        }
        totals.entries += 1;
        totals.through_ms = totals.through_ms.max(ts);
        gone.push(seq);
    }
    tx.execute("DELETE FROM ledger WHERE seq = ANY($1::bigint[])", &[&gone])
        .await?;
    for (client, f) in folded {
        tx.execute(
            "INSERT INTO ledger_compacted AS c (client, charged, refunded, entries, through_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (client) DO UPDATE SET charged = c.charged + excluded.charged,
                refunded = c.refunded + excluded.refunded, entries = c.entries + excluded.entries,
                through_ms = GREATEST(c.through_ms, excluded.through_ms)",
            &[&client, &f.charged, &f.refunded, &f.entries, &f.through_ms],
        )
        .await?;
    }
    Ok((gone.len() as u64, next, reached))
}
