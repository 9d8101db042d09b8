//! Read-side SQL for the store; every function runs on the read connection inside
//! `spawn_blocking`.

use std::collections::HashMap;

use rusqlite::{params, Connection, Row};

use super::super::records::{
    AffinityBinding, AttemptRecord, LedgerEntry, LedgerKind, LedgerTotals, RequestRecord, StateKey,
    StateRow,
};
use super::super::StoreError;

/// SQLite INTEGER → u64, negative values read as 0.
fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn request_from_row(row: &Row<'_>) -> rusqlite::Result<RequestRecord> {
    let id: String = row.get("id")?;
    let attempts_json: String = row.get("attempts")?;
    let attempts: Vec<AttemptRecord> = match serde_json::from_str(&attempts_json) {
        Ok(a) => a,
        Err(err) => {
            tracing::warn!(request_id = %id, error = %err, "unreadable attempts column");
            Vec::new()
        }
    };
    let final_status: i64 = row.get("final_status")?;
    Ok(RequestRecord {
        id,
        ts_ms: row.get("ts_ms")?,
        client: row.get("client")?,
        group: row.get("grp")?,
        public_model: row.get("public_model")?,
        upstream_model: row.get("upstream_model")?,
        path: row.get("path")?,
        stream: row.get("stream")?,
        attempts,
        chain: row.get("chain")?,
        final_status: u16::try_from(final_status).unwrap_or(0),
        error_code: row.get("error_code")?,
        sticky_kind: row.get("sticky_kind")?,
        sticky_hit: row.get("sticky_hit")?,
        fallback: row.get("fallback")?,
        failed_over: false,
        prompt_tokens: to_u64(row.get("prompt_tokens")?),
        completion_tokens: to_u64(row.get("completion_tokens")?),
        cached_tokens: to_u64(row.get("cached_tokens")?),
        usage_estimated: row.get("usage_estimated")?,
        stream_outcome: row.get("stream_outcome")?,
        latency_ms: to_u64(row.get("latency_ms")?),
        trace_id: row.get("trace_id")?,
    }
    .with_failed_over())
}

/// Newest first (by timestamp, then insertion order).
pub(crate) fn recent_requests(
    conn: &Connection,
    limit: usize,
) -> Result<Vec<RequestRecord>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached("SELECT * FROM request_log ORDER BY seq DESC LIMIT ?1")?;
    let rows = stmt.query_map(params![limit], request_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(crate) fn request_count(conn: &Connection) -> Result<u64, StoreError> {
    let count: i64 = conn.query_row("SELECT COUNT(*) FROM request_log", [], |row| row.get(0))?;
    Ok(to_u64(count))
}

/// Per client: `charged` = sum(precharge) + sum(settle) − sum(refund),
/// `refunded` = sum(refund), over the ledger rows and the totals compacted from older ones.
pub(crate) fn ledger_totals(
    conn: &Connection,
) -> Result<HashMap<String, LedgerTotals>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT client,
                SUM(CASE kind WHEN 'refund' THEN -amount ELSE amount END),
                SUM(CASE kind WHEN 'refund' THEN amount ELSE 0 END)
         FROM ledger GROUP BY client
         UNION ALL
         SELECT client, charged, refunded FROM ledger_compacted",
    )?;
    let rows = stmt.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            LedgerTotals {
                charged: row.get(1)?,
                refunded: row.get(2)?,
            },
        ))
    })?;
    let mut out: HashMap<String, LedgerTotals> = HashMap::new();
    for row in rows {
        let (client, t) = row?;
        let totals = out.entry(client).or_default();
        totals.charged = totals.charged.saturating_add(t.charged);
        totals.refunded = totals.refunded.saturating_add(t.refunded);
    }
    Ok(out)
}

fn ledger_from_row(row: &Row<'_>) -> rusqlite::Result<Option<LedgerEntry>> {
    let kind: String = row.get("kind")?;
    let Some(kind) = LedgerKind::parse(&kind) else {
        tracing::warn!(kind = %kind, "unknown ledger kind skipped");
        return Ok(None);
    };
    Ok(Some(LedgerEntry {
        request_id: row.get("request_id")?,
        client: row.get("client")?,
        kind,
        amount: row.get("amount")?,
        ts_ms: row.get("ts_ms")?,
        foldable: false,
    }))
}

/// Precharges with neither a settle nor a refund (the process died mid-request),
/// oldest first.
pub(crate) fn dangling_precharges(conn: &Connection) -> Result<Vec<LedgerEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT * FROM ledger p
         WHERE p.kind = 'precharge'
           AND NOT EXISTS (SELECT 1 FROM ledger t
                           WHERE t.request_id = p.request_id AND t.kind <> 'precharge')
         ORDER BY p.ts_ms, p.rowid",
    )?;
    let rows = stmt.query_map([], ledger_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        if let Some(e) = row? {
            out.push(e);
        }
    }
    Ok(out)
}

/// Every entry of one request, in insertion order (admin / diagnostics).
pub(crate) fn ledger_for_request(
    conn: &Connection,
    request_id: &str,
) -> Result<Vec<LedgerEntry>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT * FROM ledger WHERE request_id = ?1 ORDER BY rowid")?;
    let rows = stmt.query_map(params![request_id], ledger_from_row)?;
    let mut out = Vec::new();
    for row in rows {
        if let Some(e) = row? {
            out.push(e);
        }
    }
    Ok(out)
}

/// The `key_fp` column back to a [`StateKey`] (inverse of `writer::key_column`).
fn state_key(col: &str) -> StateKey {
    match col.strip_prefix('#').map(str::parse::<u32>) {
        _ if col.is_empty() => StateKey::Channel,
        Some(Ok(n)) => StateKey::LegacyIndex(n),
        _ => StateKey::Key(col.to_owned()),
    }
}

pub(crate) fn disabled_states(conn: &Connection) -> Result<Vec<StateRow>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT channel, key_fp, reason, ts_ms, auto FROM channel_state ORDER BY channel, key_fp",
    )?;
    let rows = stmt.query_map([], |row| {
        let key: String = row.get(1)?;
        Ok(StateRow {
            channel: row.get(0)?,
            key: state_key(&key),
            disabled: true,
            reason: row.get(2)?,
            ts_ms: row.get(3)?,
            auto: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// `client`'s bindings of `task_id`, newest first, then those stored before schema v4
/// (client `''`, owner unknown).
pub(crate) fn task_channels(
    conn: &Connection,
    client: &str,
    task_id: &str,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT channel FROM task_binding WHERE client IN (?1, '') AND task_id = ?2
         ORDER BY client = '', ts_ms DESC, channel",
    )?;
    let rows = stmt.query_map(params![client, task_id], |row| row.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Bindings with `expires_ms > now_ms`.
pub(crate) fn affinity_bindings(
    conn: &Connection,
    now_ms: i64,
) -> Result<Vec<AffinityBinding>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT key, channel, expires_ms FROM affinity_binding WHERE expires_ms > ?1 ORDER BY key",
    )?;
    let rows = stmt.query_map(params![now_ms], |row| {
        Ok(AffinityBinding {
            key: row.get(0)?,
            channel: row.get(1)?,
            expires_ms: row.get(2)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
