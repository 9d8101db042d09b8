//! Retention in PostgreSQL (`storage.request_log.*`), one small transaction per round like
//! SQLite's: the oldest request-log rows beyond `max_rows` or older than `max_age`, and old
//! ledger rows of closed sessions folded into `ledger_compacted`. Every replica runs rounds;
//! the ledger fold takes a transaction advisory lock, so one replica folds at a time.

use tokio_postgres::Client;

use super::super::fold::{Fold, Row};
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
    let mut fold = Fold::new(before, cursor);
    for row in &rows {
        let (client, kind): (String, String) = (row.get(1), row.get(2));
        let offered = Row {
            id: row.get(0),
            client: &client,
            kind: &kind,
            amount: row.get(3),
            ts_ms: row.get(4),
            // Still open: its lease decides.
            closed: row.get(5),
        };
        if !fold.offer(offered) {
            break;
        }
    }
    tx.execute(
        "DELETE FROM ledger WHERE seq = ANY($1::bigint[])",
        &[&fold.gone],
    )
    .await?;
    for (client, totals) in &fold.totals {
        tx.execute(
            "INSERT INTO ledger_compacted AS c (client, charged, refunded, entries, through_ms)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (client) DO UPDATE SET charged = c.charged + excluded.charged,
                refunded = c.refunded + excluded.refunded, entries = c.entries + excluded.entries,
                through_ms = GREATEST(c.through_ms, excluded.through_ms)",
            &[
                client,
                &totals.charged,
                &totals.refunded,
                &totals.entries,
                &totals.through_ms,
            ],
        )
        .await?;
    }
    Ok((fold.gone.len() as u64, fold.next, fold.reached || !full))
}
