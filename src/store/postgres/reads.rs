//! The read side of a PostgreSQL store: each query on a pooled connection, bounded by the
//! store's timeout.

use std::collections::HashMap;

use tokio_postgres::Row;

use super::super::records::{
    AffinityBinding, AttemptRecord, LedgerEntry, LedgerKind, LedgerTotals, RequestRecord, StateKey,
    StateRow,
};
use super::super::StoreError;
use super::Remote;

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A text column as a shared string.
fn text(row: &Row, col: &str) -> std::sync::Arc<str> {
    row.get::<_, &str>(col).into()
}

fn request(row: &Row) -> RequestRecord {
    let id: String = row.get("id");
    let attempts: String = row.get("attempts");
    let attempts: Vec<AttemptRecord> = serde_json::from_str(&attempts).unwrap_or_else(|e| {
        tracing::warn!(request_id = %id, error = %e, "unreadable attempts column");
        Vec::new()
    });
    RequestRecord {
        id,
        ts_ms: row.get("ts_ms"),
        client: text(row, "client"),
        group: text(row, "grp"),
        public_model: text(row, "public_model"),
        upstream_model: text(row, "upstream_model"),
        path: text(row, "path"),
        stream: row.get("stream"),
        attempts,
        chain: text(row, "chain"),
        final_status: u16::try_from(row.get::<_, i32>("final_status")).unwrap_or(0),
        error_code: row.get("error_code"),
        sticky_kind: row.get("sticky_kind"),
        sticky_hit: row.get("sticky_hit"),
        fallback: row.get("fallback"),
        failed_over: false,
        prompt_tokens: to_u64(row.get("prompt_tokens")),
        completion_tokens: to_u64(row.get("completion_tokens")),
        cached_tokens: to_u64(row.get("cached_tokens")),
        usage_estimated: row.get("usage_estimated"),
        stream_outcome: row
            .get::<_, Option<String>>("stream_outcome")
            .map(Into::into),
        latency_ms: to_u64(row.get("latency_ms")),
        trace_id: row.get("trace_id"),
    }
    .with_failed_over()
}

fn ledger(row: &Row) -> Option<LedgerEntry> {
    let kind: String = row.get("kind");
    Some(LedgerEntry {
        request_id: row.get("request_id"),
        client: text(row, "client"),
        kind: LedgerKind::parse(&kind)?,
        amount: row.get("amount"),
        ts_ms: row.get("ts_ms"),
        foldable: false,
    })
}

fn state_key(col: &str) -> StateKey {
    match col.strip_prefix('#').map(str::parse::<u32>) {
        _ if col.is_empty() => StateKey::Channel,
        Some(Ok(n)) => StateKey::LegacyIndex(n),
        _ => StateKey::Key(col.to_owned()),
    }
}

impl Remote {
    pub(crate) async fn recent_requests(
        &self,
        limit: usize,
    ) -> Result<Vec<RequestRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT * FROM request_log ORDER BY seq DESC LIMIT $1",
                    &[&limit],
                )
                .await?;
            Ok(rows.iter().map(request).collect())
        })
        .await
    }

    pub(crate) async fn request_count(&self) -> Result<u64, StoreError> {
        self.with(async |c| {
            let count: i64 = c
                .query_one("SELECT COUNT(*) FROM request_log", &[])
                .await?
                .get(0);
            Ok(to_u64(count))
        })
        .await
    }

    /// Ledger sums per client (rows plus the compacted totals), as in SQLite.
    pub(crate) async fn ledger_totals(&self) -> Result<HashMap<String, LedgerTotals>, StoreError> {
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT client, SUM(charged)::BIGINT, SUM(refunded)::BIGINT FROM (
                        SELECT client,
                               SUM(CASE kind WHEN 'refund' THEN -amount ELSE amount END) AS charged,
                               SUM(CASE kind WHEN 'refund' THEN amount ELSE 0 END) AS refunded
                        FROM ledger GROUP BY client
                        UNION ALL
                        SELECT client, charged, refunded FROM ledger_compacted) t
                     GROUP BY client",
                    &[],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| {
                    let totals = LedgerTotals {
                        charged: row.get::<_, Option<i64>>(1).unwrap_or(0),
                        refunded: row.get::<_, Option<i64>>(2).unwrap_or(0),
                    };
                    (row.get::<_, String>(0), totals)
                })
                .collect())
        })
        .await
    }

    pub(crate) async fn dangling_precharges(&self) -> Result<Vec<LedgerEntry>, StoreError> {
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT * FROM ledger p WHERE p.kind = 'precharge'
                       AND NOT EXISTS (SELECT 1 FROM ledger t
                                       WHERE t.request_id = p.request_id AND t.kind <> 'precharge')
                     ORDER BY p.ts_ms, p.seq",
                    &[],
                )
                .await?;
            Ok(rows.iter().filter_map(ledger).collect())
        })
        .await
    }

    pub(crate) async fn ledger_for_request(
        &self,
        id: &str,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT * FROM ledger WHERE request_id = $1 ORDER BY seq",
                    &[&id],
                )
                .await?;
            Ok(rows.iter().filter_map(ledger).collect())
        })
        .await
    }

    pub(crate) async fn disabled_states(&self) -> Result<Vec<StateRow>, StoreError> {
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT channel, key_fp, reason, ts_ms, auto FROM channel_state
                     ORDER BY channel, key_fp",
                    &[],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| StateRow {
                    channel: row.get(0),
                    key: state_key(row.get(1)),
                    disabled: true,
                    reason: row.get(2),
                    ts_ms: row.get(3),
                    auto: row.get(4),
                })
                .collect())
        })
        .await
    }

    pub(crate) async fn task_channels(
        &self,
        client: &str,
        id: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT channel FROM task_binding WHERE client IN ($1, '') AND task_id = $2
                     ORDER BY client = '', ts_ms DESC, channel",
                    &[&client, &super::apply::text(id)],
                )
                .await?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
        .await
    }

    pub(crate) async fn affinity_bindings(
        &self,
        now_ms: i64,
    ) -> Result<Vec<AffinityBinding>, StoreError> {
        self.with(async |c| {
            let rows = c
                .query(
                    "SELECT key, channel, expires_ms FROM affinity_binding
                     WHERE expires_ms > $1 ORDER BY key",
                    &[&now_ms],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|row| AffinityBinding {
                    key: row.get(0),
                    channel: row.get(1),
                    expires_ms: row.get(2),
                })
                .collect())
        })
        .await
    }
}
