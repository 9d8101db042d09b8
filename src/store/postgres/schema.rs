//! PostgreSQL schema and its versioned migrations. `migrate` holds a session advisory lock
//! while it checks and applies versions, so replicas starting at the same moment apply each
//! version exactly once; every step is idempotent besides (`IF NOT EXISTS`).

use tokio_postgres::NoTls;

use super::super::StoreError;

/// Advisory lock key of the migration step ("switchyd" in ASCII).
const MIGRATION_LOCK: i64 = 0x7377_6974_6368_7964;

/// Ordered migrations; index + 1 is the version. Never edit a shipped entry, append.
const MIGRATIONS: &[&str] = &[
    // v1: everything a replica shares. Ledger amounts are micro-credits (see `store`).
    "CREATE TABLE IF NOT EXISTS request_log (
        seq               BIGSERIAL PRIMARY KEY,
        id                TEXT    NOT NULL,
        ts_ms             BIGINT  NOT NULL,
        client            TEXT    NOT NULL,
        grp               TEXT    NOT NULL,
        public_model      TEXT    NOT NULL,
        upstream_model    TEXT    NOT NULL,
        path              TEXT    NOT NULL,
        stream            BOOLEAN NOT NULL,
        attempts          TEXT    NOT NULL,
        chain             TEXT    NOT NULL,
        final_status      INTEGER NOT NULL,
        error_code        TEXT,
        sticky_kind       TEXT,
        sticky_hit        BOOLEAN,
        fallback          BOOLEAN NOT NULL,
        prompt_tokens     BIGINT  NOT NULL,
        completion_tokens BIGINT  NOT NULL,
        cached_tokens     BIGINT  NOT NULL,
        usage_estimated   BOOLEAN NOT NULL,
        stream_outcome    TEXT,
        latency_ms        BIGINT  NOT NULL
    );
    CREATE INDEX IF NOT EXISTS request_log_id ON request_log (id);

    CREATE TABLE IF NOT EXISTS ledger (
        seq        BIGSERIAL PRIMARY KEY,
        request_id TEXT   NOT NULL,
        client     TEXT   NOT NULL,
        kind       TEXT   NOT NULL CHECK (kind IN ('precharge', 'settle', 'refund')),
        amount     BIGINT NOT NULL,
        ts_ms      BIGINT NOT NULL
    );
    -- At most one precharge and one terminal entry (settle or refund) per session.
    CREATE UNIQUE INDEX IF NOT EXISTS ledger_once ON ledger (request_id, (kind <> 'precharge'));

    -- Net charge per client, kept in step with the ledger in the same statements.
    CREATE TABLE IF NOT EXISTS quota_balance (
        client   TEXT   PRIMARY KEY,
        charged  BIGINT NOT NULL DEFAULT 0,
        refunded BIGINT NOT NULL DEFAULT 0
    );

    -- Open precharges: the replica that owns each and until when (its lease).
    CREATE TABLE IF NOT EXISTS quota_lease (
        request_id  TEXT        PRIMARY KEY,
        client      TEXT        NOT NULL,
        amount      BIGINT      NOT NULL,
        replica     TEXT        NOT NULL,
        lease_until TIMESTAMPTZ NOT NULL,
        ts_ms       BIGINT      NOT NULL
    );
    CREATE INDEX IF NOT EXISTS quota_lease_until ON quota_lease (lease_until);

    CREATE TABLE IF NOT EXISTS ledger_compacted (
        client     TEXT   PRIMARY KEY,
        charged    BIGINT NOT NULL,
        refunded   BIGINT NOT NULL,
        entries    BIGINT NOT NULL,
        through_ms BIGINT NOT NULL
    );

    CREATE TABLE IF NOT EXISTS channel_state (
        channel TEXT    NOT NULL,
        key_fp  TEXT    NOT NULL, -- '': whole channel; hex: key fingerprint
        reason  TEXT    NOT NULL,
        ts_ms   BIGINT  NOT NULL,
        auto    BOOLEAN NOT NULL DEFAULT false,
        PRIMARY KEY (channel, key_fp)
    );

    CREATE TABLE IF NOT EXISTS task_binding (
        client  TEXT   NOT NULL,
        task_id TEXT   NOT NULL,
        channel TEXT   NOT NULL,
        ts_ms   BIGINT NOT NULL,
        PRIMARY KEY (client, task_id, channel)
    );

    CREATE TABLE IF NOT EXISTS affinity_binding (
        key        TEXT   PRIMARY KEY,
        channel    TEXT   NOT NULL,
        expires_ms BIGINT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS affinity_binding_expires ON affinity_binding (expires_ms);",
    // v2: the request's trace id (R20.1).
    "ALTER TABLE request_log ADD COLUMN IF NOT EXISTS trace_id TEXT;",
];

/// Latest PostgreSQL schema version this build knows.
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Brings the schema up to date on a connection of its own, holding the advisory lock.
pub(crate) async fn migrate(cfg: &tokio_postgres::Config) -> Result<i32, StoreError> {
    let (mut client, conn) = cfg.connect(NoTls).await?;
    let driver = tokio::spawn(conn);
    let result = migrate_locked(&mut client).await;
    drop(client);
    let _ = driver.await;
    result
}

async fn migrate_locked(client: &mut tokio_postgres::Client) -> Result<i32, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let result = apply_missing(client).await;
    // The lock also ends with the session; unlock explicitly for a pooled future.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    result
}

async fn apply_missing(client: &mut tokio_postgres::Client) -> Result<i32, StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_version (
                version    INTEGER PRIMARY KEY,
                applied_ms BIGINT  NOT NULL
            )",
        )
        .await?;
    let newest: i32 = client
        .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
        .await?
        .get(0);
    if newest > PG_SCHEMA_VERSION {
        return Err(StoreError::Setup(format!(
            "database schema version {newest} is newer than this build ({PG_SCHEMA_VERSION}); run the newer switchyard"
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        if version <= newest {
            continue;
        }
        let tx = client.transaction().await?;
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_ms) VALUES ($1, $2)",
            &[&version, &super::super::now_ms()],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(version, "store schema migrated (PostgreSQL)");
    }
    Ok(PG_SCHEMA_VERSION)
}
