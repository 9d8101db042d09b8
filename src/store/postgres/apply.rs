//! The writer's statements for each [`WriteOp`] in PostgreSQL. Every one is idempotent, so a
//! batch whose commit was not confirmed (the connection died) is simply written again.

use tokio_postgres::{Client, GenericClient, Statement};

use super::super::records::{
    AffinityBinding, LedgerEntry, LedgerKind, RequestRecord, StateRow, TaskBinding, WriteOp,
};
use super::super::sqlite::writer::{key_column, to_i64};
use super::super::StoreError;

/// Settle or refund of a session: applied only by whoever deletes the session's lease, or —
/// for a settle — when the session never had a precharge (trusted, unlimited, fail-open
/// sessions); the ledger's unique index refuses a second terminal entry either way. The
/// balance moves in the same statement. One row back when applied.
const TERMINAL: &str = "WITH gone AS (
        DELETE FROM quota_lease WHERE request_id = $1::text RETURNING 1
    ), ok AS (
        SELECT 1 WHERE EXISTS (SELECT 1 FROM gone)
            OR ($3::text = 'settle' AND NOT EXISTS (
                SELECT 1 FROM ledger WHERE request_id = $1::text AND kind = 'precharge'))
    ), ins AS (
        INSERT INTO ledger (request_id, client, kind, amount, ts_ms)
        SELECT $1::text, $2::text, $3::text, $4::bigint, $5::bigint FROM ok
        ON CONFLICT DO NOTHING RETURNING kind, amount
    )
    INSERT INTO quota_balance AS b (client, charged, refunded)
    SELECT $2::text, CASE WHEN kind = 'refund' THEN -amount ELSE amount END,
           CASE WHEN kind = 'refund' THEN amount ELSE 0 END FROM ins
    ON CONFLICT (client) DO UPDATE SET charged = b.charged + excluded.charged,
        refunded = b.refunded + excluded.refunded";

/// A precharge sent through the queue (not the request-path debit): charged unconditionally,
/// once, with a lease of this replica that is not renewed (it is swept unless settled).
const PRECHARGE: &str = "WITH ins AS (
        INSERT INTO ledger (request_id, client, kind, amount, ts_ms)
        VALUES ($1::text, $2::text, 'precharge', $3::bigint, $4::bigint)
        ON CONFLICT DO NOTHING RETURNING amount
    ), l AS (
        INSERT INTO quota_lease (request_id, client, amount, replica, lease_until, ts_ms)
        SELECT $1::text, $2::text, amount, $5::text,
               now() + $6::bigint * interval '1 millisecond', $4::bigint FROM ins
        ON CONFLICT DO NOTHING
    )
    INSERT INTO quota_balance AS b (client, charged, refunded)
    SELECT $2::text, amount, 0 FROM ins
    ON CONFLICT (client) DO UPDATE SET charged = b.charged + excluded.charged";

const REQUESTS: &str = "INSERT INTO request_log (id, ts_ms, client, grp, public_model,
    upstream_model, path, stream, attempts, chain, final_status, error_code, sticky_kind,
    sticky_hit, fallback, prompt_tokens, completion_tokens, cached_tokens, usage_estimated,
    stream_outcome, latency_ms, trace_id)
    SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[],
        $6::text[], $7::text[], $8::bool[], $9::text[], $10::text[], $11::int[], $12::text[],
        $13::text[], $14::bool[], $15::bool[], $16::bigint[], $17::bigint[], $18::bigint[],
        $19::bool[], $20::text[], $21::bigint[], $22::text[])";

const STATE_SET: &str = "INSERT INTO channel_state (channel, key_fp, reason, ts_ms, auto)
    VALUES ($1, $2, $3, $4, $5)
    ON CONFLICT (channel, key_fp) DO UPDATE SET reason = excluded.reason,
        ts_ms = excluded.ts_ms, auto = excluded.auto";
const STATE_CLEAR: &str = "DELETE FROM channel_state WHERE channel = $1 AND key_fp = $2";
const TASK: &str = "INSERT INTO task_binding (client, task_id, channel, ts_ms)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (client, task_id, channel) DO UPDATE SET ts_ms = excluded.ts_ms";
const AFFINITY: &str = "INSERT INTO affinity_binding (key, channel, expires_ms)
    VALUES ($1, $2, $3)
    ON CONFLICT (key) DO UPDATE SET channel = excluded.channel, expires_ms = excluded.expires_ms";

/// PostgreSQL text cannot hold NUL; a client- or upstream-chosen string that carries one
/// (a model name, a task id, an error reason) is stored with U+FFFD instead of failing the
/// whole batch.
pub(crate) fn text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        std::borrow::Cow::Owned(s.replace('\0', "\u{fffd}"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// The writer's statements, prepared once per connection.
pub(crate) struct Stmts {
    terminal: Statement,
    precharge: Statement,
    requests: Statement,
    state_set: Statement,
    state_clear: Statement,
    task: Statement,
    affinity: Statement,
}

impl Stmts {
    pub(crate) async fn prepare(client: &Client) -> Result<Stmts, StoreError> {
        Ok(Stmts {
            terminal: client.prepare(TERMINAL).await?,
            precharge: client.prepare(PRECHARGE).await?,
            requests: client.prepare(REQUESTS).await?,
            state_set: client.prepare(STATE_SET).await?,
            state_clear: client.prepare(STATE_CLEAR).await?,
            task: client.prepare(TASK).await?,
            affinity: client.prepare(AFFINITY).await?,
        })
    }
}

/// What the lease of a queued precharge is (this replica, its period).
pub(crate) struct Owner<'a> {
    pub(crate) replica: &'a str,
    pub(crate) ttl_ms: i64,
}

/// One op (not a request-log entry). `Ok(Some(applied))` for a ledger entry.
pub(crate) async fn one<C: GenericClient>(
    client: &C,
    stmts: &Stmts,
    owner: &Owner<'_>,
    op: &WriteOp,
) -> Result<Option<bool>, StoreError> {
    match op {
        WriteOp::Ledger(e) => ledger(client, stmts, owner, e).await.map(Some),
        WriteOp::StateRow(st) => state(client, stmts, st).await.map(|()| None),
        WriteOp::TaskBinding(t) => task(client, stmts, t).await.map(|()| None),
        WriteOp::AffinityBinding(a) => affinity(client, stmts, a).await.map(|()| None),
        WriteOp::AffinityBindings(list) => {
            for a in list {
                affinity(client, stmts, a).await?;
            }
            Ok(None)
        }
        WriteOp::RequestLog(r) => requests(client, stmts, &[r.as_ref()]).await.map(|()| None),
        WriteOp::Flush(_) | WriteOp::Prune(_) => Ok(None),
    }
}

async fn ledger<C: GenericClient>(
    client: &C,
    stmts: &Stmts,
    owner: &Owner<'_>,
    entry: &LedgerEntry,
) -> Result<bool, StoreError> {
    let rows = match entry.kind {
        LedgerKind::Precharge => {
            client
                .execute(
                    &stmts.precharge,
                    &[
                        &entry.request_id,
                        &&*entry.client,
                        &entry.amount,
                        &entry.ts_ms,
                        &owner.replica,
                        &owner.ttl_ms,
                    ],
                )
                .await?
        }
        LedgerKind::Settle | LedgerKind::Refund => {
            client
                .execute(
                    &stmts.terminal,
                    &[
                        &entry.request_id,
                        &&*entry.client,
                        &entry.kind.as_str(),
                        &entry.amount,
                        &entry.ts_ms,
                    ],
                )
                .await?
        }
    };
    Ok(rows > 0)
}

async fn state<C: GenericClient>(
    client: &C,
    stmts: &Stmts,
    st: &StateRow,
) -> Result<(), StoreError> {
    let key = key_column(&st.key);
    if st.disabled {
        client
            .execute(
                &stmts.state_set,
                &[&st.channel, &key, &text(&st.reason), &st.ts_ms, &st.auto],
            )
            .await?;
    } else {
        client
            .execute(&stmts.state_clear, &[&st.channel, &key])
            .await?;
    }
    Ok(())
}

async fn task<C: GenericClient>(
    client: &C,
    stmts: &Stmts,
    t: &TaskBinding,
) -> Result<(), StoreError> {
    client
        .execute(
            &stmts.task,
            &[&t.client, &text(&t.task_id), &t.channel, &t.ts_ms],
        )
        .await?;
    Ok(())
}

async fn affinity<C: GenericClient>(
    client: &C,
    stmts: &Stmts,
    binding: &AffinityBinding,
) -> Result<(), StoreError> {
    client
        .execute(
            &stmts.affinity,
            &[&binding.key, &binding.channel, &binding.expires_ms],
        )
        .await?;
    Ok(())
}

/// Every request-log entry of a batch in one statement (arrays unnested server-side).
pub(crate) async fn requests<C: GenericClient>(
    client: &C,
    stmts: &Stmts,
    rows: &[&RequestRecord],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&RequestRecord) -> &str| {
        rows.iter()
            .map(|r| text(f(r)).into_owned())
            .collect::<Vec<_>>()
    };
    let opt = |f: fn(&RequestRecord) -> Option<&str>| {
        rows.iter()
            .map(|r| f(r).map(|stmts| text(stmts).into_owned()))
            .collect::<Vec<_>>()
    };
    let num = |f: fn(&RequestRecord) -> u64| rows.iter().map(|r| to_i64(f(r))).collect::<Vec<_>>();
    let flag = |f: fn(&RequestRecord) -> bool| rows.iter().map(|r| f(r)).collect::<Vec<_>>();
    let attempts = rows
        .iter()
        .map(|r| serde_json::to_string(&r.attempts).map(|a| text(&a).into_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    let ts: Vec<i64> = rows.iter().map(|record| record.ts_ms).collect();
    let status: Vec<i32> = rows.iter().map(|r| i32::from(r.final_status)).collect();
    let sticky_hit: Vec<Option<bool>> = rows.iter().map(|record| record.sticky_hit).collect();
    client
        .execute(
            &stmts.requests,
            &[
                &col(|r| &r.id),
                &ts,
                &col(|r| &r.client),
                &col(|r| &r.group),
                &col(|r| &r.public_model),
                &col(|r| &r.upstream_model),
                &col(|r| &r.path),
                &flag(|record| record.stream),
                &attempts,
                &col(|r| &r.chain),
                &status,
                &opt(|r| r.error_code.as_deref()),
                &opt(|record| record.sticky_kind.as_deref()),
                &sticky_hit,
                &flag(|r| r.fallback),
                &num(|record| record.prompt_tokens),
                &num(|r| r.completion_tokens),
                &num(|r| r.cached_tokens),
                &flag(|record| record.usage_estimated),
                &opt(|record| record.stream_outcome.as_deref()),
                &num(|record| record.latency_ms),
                &opt(|record| record.trace_id.as_deref()),
            ],
        )
        .await?;
    Ok(())
}
