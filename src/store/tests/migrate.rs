//! Schema v3 (a performance change): a v2 database keeps every row, and the hot inserts stay cheap.

use rusqlite::Connection;

use super::super::sqlite::schema::MIGRATIONS;
use super::*;

/// Applies migrations v1..=`version` to a fresh database, as an older build would have.
pub(super) fn apply_up_to(c: &Connection, version: usize) {
    for (i, m) in MIGRATIONS[..version].iter().enumerate() {
        let tx = c.unchecked_transaction().unwrap();
        m.apply(&tx).unwrap();
        tx.execute("INSERT INTO schema_version VALUES (?1, 0)", [i as i64 + 1])
            .unwrap();
        tx.commit().unwrap();
    }
}

/// A database at schema v2 with a request-log row and a dangling precharge.
fn v2_database(path: &str) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, applied_ms INTEGER NOT NULL);",
    )
    .unwrap();
    apply_up_to(&conn, 2);
    conn.execute_batch(
        "INSERT INTO request_log (id, ts_ms, client, grp, public_model, upstream_model, path,
            stream, attempts, chain, final_status, fallback, prompt_tokens, completion_tokens,
            cached_tokens, usage_estimated, latency_ms)
         VALUES ('old', 5, 'c', 'g', 'm', 'm', '/v1/x', 0, '[]', 'a', 200, 0, 1, 2, 0, 0, 9);
         INSERT INTO ledger VALUES ('q1/1', 'alice', 'precharge', 9, 1);
         INSERT INTO ledger VALUES ('q2/1', 'alice', 'precharge', 4, 2);
         INSERT INTO ledger VALUES ('q2/1', 'alice', 'settle', 1, 3);",
    )
    .unwrap();
}

#[tokio::test]
async fn v2_rows_survive_the_v3_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    v2_database(&path);
    let store = Store::open(&path).unwrap();
    // Old rows are kept, new ones come after them.
    assert!(store.try_send(request("new", 7)));
    store.flush().await.unwrap();
    let ids: Vec<String> = store
        .recent_requests(10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["new", "old"]);
    let dangling = store.dangling_precharges().await.unwrap();
    assert_eq!(dangling.len(), 1);
    assert_eq!(dangling[0].request_id, "q1/1");
    // Still one terminal entry per session: a refund after the settle is ignored.
    store
        .send_durable(entry("q2/1", "alice", LedgerKind::Refund, 4))
        .unwrap();
    store.flush().await.unwrap();
    let kinds: Vec<LedgerKind> = store
        .ledger_for_request("q2/1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, [LedgerKind::Precharge, LedgerKind::Settle]);
    store.shutdown().await.unwrap();
}

/// The ledger insert plan builds no ephemeral table (a CHECK written with `IN (...)` did,
/// on every row) and the request-log insert touches only its own table: no
/// sqlite_sequence (v3), no id index (v7, nothing read by it).
#[test]
fn hot_inserts_touch_no_extra_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    drop(Store::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    let opcodes = |sql: &str| -> Vec<String> {
        let mut st = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        st.query_map([], |r| r.get::<_, String>(1))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let ledger = opcodes("INSERT OR IGNORE INTO ledger VALUES ('a', 'b', 'settle', 1, 2)");
    assert!(!ledger.iter().any(|o| o == "OpenEphemeral"), "{ledger:?}");
    let log = opcodes(
        "INSERT INTO request_log (id, ts_ms, client, grp, public_model, upstream_model, path,
            stream, attempts, chain, final_status, fallback, prompt_tokens, completion_tokens,
            cached_tokens, usage_estimated, latency_ms)
         VALUES ('x', 5, 'c', 'g', 'm', 'm', '/v1/x', 0, '[]', 'a', 200, 0, 1, 2, 0, 0, 9)",
    );
    let opens = log.iter().filter(|o| o.starts_with("Open")).count();
    assert_eq!(opens, 1, "the table only: {log:?}");
    let opens = ledger.iter().filter(|o| o.starts_with("Open")).count();
    assert_eq!(opens, 2, "table + one unique index: {ledger:?}");
}

/// The one ledger index keeps both rules: a second precharge and a second terminal entry
/// of a session are ignored, whatever their kind.
#[tokio::test]
async fn one_precharge_and_one_terminal_per_session() {
    let store = Store::open(":memory:").unwrap();
    for e in [
        entry("s1", "alice", LedgerKind::Precharge, 10),
        entry("s1", "alice", LedgerKind::Precharge, 99),
        entry("s1", "alice", LedgerKind::Refund, 10),
        entry("s1", "alice", LedgerKind::Settle, 5),
        entry("s2", "alice", LedgerKind::Settle, 7),
        entry("s2", "alice", LedgerKind::Settle, 8),
    ] {
        store.send_durable(e).unwrap();
    }
    store.flush().await.unwrap();
    let rows = |id: &'static str| {
        let store = store.clone();
        async move {
            store
                .ledger_for_request(id)
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.kind, e.amount))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        rows("s1").await,
        [(LedgerKind::Precharge, 10), (LedgerKind::Refund, 10)]
    );
    assert_eq!(rows("s2").await, [(LedgerKind::Settle, 7)]);
    assert!(store.dangling_precharges().await.unwrap().is_empty());
}
