//! Connection setup (pragmas, in-memory naming) and schema migrations for the store.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction};

use super::super::StoreError;

/// One schema step: plain SQL, or a function for a step that is more than one batch.
pub(crate) enum Migration {
    Sql(&'static str),
    Step(fn(&Transaction<'_>) -> Result<(), StoreError>),
}

impl Migration {
    pub(crate) fn apply(&self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        match self {
            Migration::Sql(sql) => Ok(tx.execute_batch(sql)?),
            Migration::Step(f) => f(tx),
        }
    }
}

/// Ordered migrations; index + 1 is the schema version. Never edit a shipped entry,
/// append a new one.
pub(crate) const MIGRATIONS: &[Migration] = &[
    // v1
    Migration::Sql(
        "CREATE TABLE request_log (
        seq               INTEGER PRIMARY KEY AUTOINCREMENT,
        id                TEXT    NOT NULL,
        ts_ms             INTEGER NOT NULL,
        client            TEXT    NOT NULL,
        grp               TEXT    NOT NULL,
        public_model      TEXT    NOT NULL,
        upstream_model    TEXT    NOT NULL,
        path              TEXT    NOT NULL,
        stream            INTEGER NOT NULL,
        attempts          TEXT    NOT NULL,
        chain             TEXT    NOT NULL,
        final_status      INTEGER NOT NULL,
        error_code        TEXT,
        sticky_kind       TEXT,
        sticky_hit        INTEGER,
        fallback          INTEGER NOT NULL,
        prompt_tokens     INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cached_tokens     INTEGER NOT NULL,
        usage_estimated   INTEGER NOT NULL,
        stream_outcome    TEXT,
        latency_ms        INTEGER NOT NULL
    );
    CREATE INDEX request_log_ts ON request_log(ts_ms);
    CREATE INDEX request_log_id ON request_log(id);

    CREATE TABLE ledger (
        request_id TEXT    NOT NULL,
        client     TEXT    NOT NULL,
        kind       TEXT    NOT NULL CHECK (kind IN ('precharge', 'settle', 'refund')),
        amount     INTEGER NOT NULL,
        ts_ms      INTEGER NOT NULL,
        UNIQUE (request_id, kind)
    );
    -- At most one terminal entry (settle or refund) per request: the first one wins.
    CREATE UNIQUE INDEX ledger_terminal ON ledger(request_id)
        WHERE kind IN ('settle', 'refund');
    CREATE INDEX ledger_client ON ledger(client);

    CREATE TABLE channel_state (
        channel   TEXT    NOT NULL,
        key_index INTEGER NOT NULL, -- -1: whole channel
        reason    TEXT    NOT NULL,
        ts_ms     INTEGER NOT NULL,
        PRIMARY KEY (channel, key_index)
    );

    CREATE TABLE task_binding (
        task_id TEXT    NOT NULL PRIMARY KEY,
        channel TEXT    NOT NULL,
        ts_ms   INTEGER NOT NULL
    );

    CREATE TABLE affinity_binding (
        key        TEXT    NOT NULL PRIMARY KEY,
        channel    TEXT    NOT NULL,
        expires_ms INTEGER NOT NULL
    );
    CREATE INDEX affinity_binding_expires ON affinity_binding(expires_ms);",
    ),
    // v2: auto (1) vs operator (0) disables (R7.2)
    Migration::Sql("ALTER TABLE channel_state ADD COLUMN auto INTEGER NOT NULL DEFAULT 0;"),
    // v3: fewer b-trees touched per hot-path insert (found by profiling). request_log loses
    // AUTOINCREMENT (a sqlite_sequence read + write per row; `seq` stays the rowid, still
    // increasing) and its ts index (the admin list orders by seq). ledger's CHECK used
    // `IN (...)`, which builds an ephemeral table on every insert; the same check as ORs.
    // ledger_client was only read by start-up recovery, which scans the table anyway, and
    // the two unique rules share one index.
    Migration::Sql(
        "CREATE TABLE request_log_v3 (
        seq               INTEGER PRIMARY KEY,
        id                TEXT    NOT NULL,
        ts_ms             INTEGER NOT NULL,
        client            TEXT    NOT NULL,
        grp               TEXT    NOT NULL,
        public_model      TEXT    NOT NULL,
        upstream_model    TEXT    NOT NULL,
        path              TEXT    NOT NULL,
        stream            INTEGER NOT NULL,
        attempts          TEXT    NOT NULL,
        chain             TEXT    NOT NULL,
        final_status      INTEGER NOT NULL,
        error_code        TEXT,
        sticky_kind       TEXT,
        sticky_hit        INTEGER,
        fallback          INTEGER NOT NULL,
        prompt_tokens     INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        cached_tokens     INTEGER NOT NULL,
        usage_estimated   INTEGER NOT NULL,
        stream_outcome    TEXT,
        latency_ms        INTEGER NOT NULL
    );
    INSERT INTO request_log_v3 SELECT * FROM request_log ORDER BY seq;
    DROP TABLE request_log;
    ALTER TABLE request_log_v3 RENAME TO request_log;
    DELETE FROM sqlite_sequence WHERE name = 'request_log';
    CREATE INDEX request_log_id ON request_log(id);

    CREATE TABLE ledger_v3 (
        request_id TEXT    NOT NULL,
        client     TEXT    NOT NULL,
        kind       TEXT    NOT NULL
                   CHECK (kind = 'precharge' OR kind = 'settle' OR kind = 'refund'),
        amount     INTEGER NOT NULL,
        ts_ms      INTEGER NOT NULL
    );
    INSERT INTO ledger_v3 SELECT * FROM ledger ORDER BY rowid;
    DROP TABLE ledger;
    ALTER TABLE ledger_v3 RENAME TO ledger;
    -- One index for both rules: at most one precharge and at most one terminal entry
    -- (settle or refund) per session; with INSERT OR IGNORE the first one wins.
    CREATE UNIQUE INDEX ledger_once ON ledger(request_id, kind <> 'precharge');",
    ),
    // v4: state that follows identity (B-key-fingerprint, B-tenants)
    Migration::Step(v4_identity),
    // v5: ledger compaction (B-retention)
    Migration::Step(v5_retention),
    // v6: the request's trace id (R20.1)
    Migration::Sql("ALTER TABLE request_log ADD COLUMN trace_id TEXT;"),
    // v7: no read looks a request-log row up by id (the admin list, the count and
    // retention all go by `seq`), so the index only cost a B-tree insert per request.
    Migration::Sql("DROP INDEX IF EXISTS request_log_id;"),
];

/// v4: a disabled key is stored by its fingerprint, not its position (a key removed from
/// the list must not shift its state onto the next one); rows stored by position become
/// `#<n>` and are resolved against the configured keys at the next start. A task binding
/// belongs to (client, task id, channel): another client never reaches it, and equal ids
/// from two channels are two rows. Bindings stored before have client `''` (owner unknown).
fn v4_identity(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(
        "CREATE TABLE channel_state_v4 (
            channel TEXT    NOT NULL,
            key_fp  TEXT    NOT NULL, -- '': whole channel; hex: key fingerprint; '#<n>': pre-v4 position
            reason  TEXT    NOT NULL,
            ts_ms   INTEGER NOT NULL,
            auto    INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (channel, key_fp)
        ) WITHOUT ROWID;
        INSERT INTO channel_state_v4
            SELECT channel, CASE WHEN key_index < 0 THEN '' ELSE '#' || key_index END,
                   reason, ts_ms, auto
            FROM channel_state;
        DROP TABLE channel_state;
        ALTER TABLE channel_state_v4 RENAME TO channel_state;

        CREATE TABLE task_binding_v4 (
            client  TEXT    NOT NULL, -- '': stored before v4, owner unknown
            task_id TEXT    NOT NULL,
            channel TEXT    NOT NULL,
            ts_ms   INTEGER NOT NULL,
            PRIMARY KEY (client, task_id, channel)
        ) WITHOUT ROWID;
        INSERT INTO task_binding_v4 SELECT '', task_id, channel, ts_ms FROM task_binding;
        DROP TABLE task_binding;
        ALTER TABLE task_binding_v4 RENAME TO task_binding;",
    )?;
    Ok(())
}

/// v5 (B-retention): ledger compaction. Ledger rows older than the retention are folded into
/// their client's totals here before they are deleted, so no balance is ever lost.
fn v5_retention(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(
        "CREATE TABLE ledger_compacted (
            client     TEXT    NOT NULL PRIMARY KEY,
            charged    INTEGER NOT NULL,  -- precharges + settles - refunds folded in
            refunded   INTEGER NOT NULL,  -- refunds folded in
            entries    INTEGER NOT NULL,  -- ledger rows folded in
            through_ms INTEGER NOT NULL   -- newest ts_ms folded in
        );",
    )?;
    Ok(())
}

/// Latest schema version this build knows.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Where the database lives, resolved once at open.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    File(String),
    /// Shared-cache in-memory database, reachable by this URI from several connections.
    Memory(String),
}

impl Target {
    pub(crate) fn resolve(path: &str) -> Target {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if path == ":memory:" {
            let next = NEXT.fetch_add(1, Ordering::Relaxed);
            Target::Memory(format!(
                "file:switchyard-mem-{}-{next}?mode=memory&cache=shared",
                std::process::id()
            ))
        } else {
            Target::File(path.to_owned())
        }
    }

    pub(crate) fn is_memory(&self) -> bool {
        matches!(self, Target::Memory(_))
    }
}

/// Opens one connection and applies the per-connection pragmas.
pub(crate) fn connect(target: &Target, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let conn = match target {
        Target::File(p) => Connection::open(p)?,
        Target::Memory(uri) => Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?,
    };
    // rusqlite's busy_timeout refuses values above i32::MAX ms; clamp to one hour.
    conn.busy_timeout(busy_timeout.min(Duration::from_secs(3600)))?;
    match target {
        Target::File(_) => {
            let mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::Setup(format!(
                    "journal_mode WAL refused (got {mode:?})"
                )));
            }
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            // 4 MiB page cache (default 2 MiB). It was 16 MiB while the request log had id
            // and ts indexes with random keys (every miss re-read a page and spilled); every
            // hot insert now lands at the right edge of its B-tree (no request-log index
            // since v7, time-ordered ledger ids), and the cache's pages stay resident.
            conn.pragma_update(None, "cache_size", -4096)?;
            // Checkpoint every ~16 MiB of WAL instead of ~4 MiB: pages rewritten between
            // checkpoints are copied back once; the WAL file is truncated back to 64 MiB.
            conn.pragma_update(None, "wal_autocheckpoint", 4000)?;
            conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
            // Read database pages through a mapping instead of one pread per page miss
            // (checkpoints and index descents); SQLite falls back silently where mmap is
            // unavailable.
            conn.pragma_update(None, "mmap_size", 256 * 1024 * 1024)?;
        }
        Target::Memory(_) => {
            // Shared-cache readers would otherwise hit SQLITE_LOCKED (which ignores
            // busy_timeout) while the writer holds its transaction open.
            conn.pragma_update(None, "read_uncommitted", true)?;
        }
    }
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(conn)
}

/// The migration of `version`, if this build knows it.
fn migration(version: i64) -> Option<&'static Migration> {
    usize::try_from(version - 1)
        .ok()
        .and_then(|i| MIGRATIONS.get(i))
}

/// Brings the schema up to `SCHEMA_VERSION`: every known version the database does not
/// record yet, in order, one transaction each.
pub(crate) fn migrate(conn: &mut Connection) -> Result<i64, StoreError> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version    INTEGER NOT NULL PRIMARY KEY,
            applied_ms INTEGER NOT NULL
        );",
    )?;
    for version in 1..=SCHEMA_VERSION {
        let Some(m) = migration(version) else {
            continue;
        };
        // The check and the migration share one IMMEDIATE transaction, so two processes
        // opening the same file cannot apply a migration twice.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let newest: i64 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |row| row.get(0),
        )?;
        if newest > SCHEMA_VERSION {
            return Err(StoreError::Setup(format!(
                "database schema version {newest} is newer than this build ({SCHEMA_VERSION})"
            )));
        }
        let applied: bool = tx.query_row(
            "SELECT EXISTS(SELECT 1 FROM schema_version WHERE version = ?1)",
            [version],
            |row| row.get(0),
        )?;
        if applied {
            continue;
        }
        m.apply(&tx)?;
        tx.execute(
            "INSERT INTO schema_version (version, applied_ms) VALUES (?1, ?2)",
            rusqlite::params![version, super::super::now_ms()],
        )?;
        tx.commit()?;
        tracing::info!(version, "store schema migrated");
    }
    Ok(SCHEMA_VERSION)
}
