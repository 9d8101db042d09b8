//! Retention (B-retention): the request log is pruned in small batches to its limits;
//! old ledger sessions are folded into their client's totals without changing any balance;
//! a full disk drops request-log entries, holds the ledger and resumes; migrations by
//! version (v5 applies after whatever v4 is).

use rusqlite::Connection;

use super::super::sqlite::schema::{MIGRATIONS, SCHEMA_VERSION};
use super::*;

fn ids(rows: Vec<RequestRecord>) -> Vec<String> {
    rows.into_iter().map(|r| r.id).collect()
}

/// Prune until a round says there is no more; returns the rounds taken.
async fn prune_all(store: &Store, before: Option<i64>, keep: Option<u64>, batch: usize) -> usize {
    let (mut rounds, mut cursor) = (0, 0);
    loop {
        let pruned = store.prune(before, keep, batch, cursor).await.unwrap();
        rounds += 1;
        assert!(
            pruned.request_log <= batch as u64 && pruned.ledger <= batch as u64,
            "{pruned:?}"
        );
        if !pruned.more {
            return rounds;
        }
        cursor = pruned.ledger_cursor;
        assert!(rounds < 1000);
    }
}

#[tokio::test]
async fn the_request_log_is_pruned_to_its_row_cap_in_batches() {
    let store = Store::open(":memory:").unwrap();
    for i in 0..50 {
        assert!(store.try_send(request(&format!("r{i:02}"), 1_000 + i)));
    }
    store.flush().await.unwrap();
    let rounds = prune_all(&store, None, Some(20), 7).await;
    assert!(rounds >= 5, "30 rows in batches of 7: {rounds} rounds");
    let left = ids(store.recent_requests(100).await.unwrap());
    let want: Vec<String> = (30..50).rev().map(|i| format!("r{i:02}")).collect();
    assert_eq!(left, want, "the newest 20 stay");
}

#[tokio::test]
async fn the_request_log_is_pruned_by_age() {
    let store = Store::open(":memory:").unwrap();
    for (id, ts) in [
        ("old1", 10),
        ("old2", 20),
        ("new1", 500),
        ("old3", 30),
        ("new2", 600),
    ] {
        assert!(store.try_send(request(id, ts)));
    }
    store.flush().await.unwrap();
    prune_all(&store, Some(100), None, 2).await;
    assert_eq!(
        ids(store.recent_requests(10).await.unwrap()),
        ["new2", "new1"]
    );
}

#[tokio::test]
async fn compacting_the_ledger_never_changes_a_balance() {
    let store = Store::open(":memory:").unwrap();
    let old = |id: &str, client: &str, kind, amount, ts| LedgerEntry {
        ts_ms: ts,
        ..entry(id, client, kind, amount)
    };
    let rows = [
        old("a1", "alice", LedgerKind::Precharge, 100, 1),
        old("a1", "alice", LedgerKind::Settle, -40, 2),
        old("a2", "alice", LedgerKind::Precharge, 70, 3),
        old("open", "alice", LedgerKind::Precharge, 55, 4), // never closed: kept
        old("a2", "alice", LedgerKind::Refund, 70, 5),
        old("u1", "unlimited", LedgerKind::Settle, 33, 6),
        old("b1", "bob", LedgerKind::Precharge, 9, 7),
        old("b1", "bob", LedgerKind::Settle, 1, 8),
        old("late", "bob", LedgerKind::Precharge, 5, 9),
        old("late", "bob", LedgerKind::Settle, 0, 10_000), // closed after the cutoff
        old("new", "alice", LedgerKind::Precharge, 8, 20_000),
    ];
    for r in rows {
        store.send_durable(r).unwrap();
    }
    store.flush().await.unwrap();
    let before = store.ledger_totals().await.unwrap();
    let dangling = store.dangling_precharges().await.unwrap();
    prune_all(&store, Some(1_000), None, 3).await;
    assert_eq!(store.ledger_totals().await.unwrap(), before, "totals moved");
    assert_eq!(store.dangling_precharges().await.unwrap(), dangling);
    for (id, left) in [
        ("a1", 0),
        ("a2", 0),
        ("u1", 0),
        ("b1", 0),
        ("open", 1),
        ("late", 1),
        ("new", 1),
    ] {
        assert_eq!(
            store.ledger_for_request(id).await.unwrap().len(),
            left,
            "{id}"
        );
    }
    // A second pass changes nothing; a settle arriving for the open session still counts.
    prune_all(&store, Some(1_000), None, 3).await;
    assert_eq!(store.ledger_totals().await.unwrap(), before);
    store
        .send_durable(entry("open", "alice", LedgerKind::Settle, -5))
        .unwrap();
    store.flush().await.unwrap();
    let totals = store.ledger_totals().await.unwrap();
    assert_eq!(totals["alice"].charged, before["alice"].charged - 5);
}

#[tokio::test]
async fn a_full_disk_drops_the_request_log_holds_the_ledger_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&db_path(&dir)).unwrap();
    store.flush().await.unwrap();
    store.cap_pages(store.page_count().await.unwrap());
    let (mut i, mut settles) = (0, 0);
    while !store.is_full() {
        assert!(i < 5_000, "the capped database never filled");
        for _ in 0..20 {
            store.try_send(request(&format!("r{i}"), i));
            i += 1;
        }
        store
            .send_durable(entry(&format!("s{i}"), "alice", LedgerKind::Settle, 1))
            .unwrap();
        settles += 1;
        store.flush().await.unwrap();
    }
    let dropped = store.dropped();
    assert!(dropped > 0, "request-log entries dropped and counted");
    // While full: request-log entries are dropped at once, ledger entries kept.
    let rows = store.request_count().await.unwrap();
    for n in 0..30 {
        assert!(store.try_send(request(&format!("full{n}"), n)));
        store
            .send_durable(entry(&format!("f{n}"), "alice", LedgerKind::Settle, 1))
            .unwrap();
        settles += 1;
    }
    store.flush().await.unwrap();
    assert!(store.is_full());
    assert_eq!(store.request_count().await.unwrap(), rows);
    assert!(store.dropped() >= dropped + 30);
    // Space again: the held ledger entries are written, and the full state ends once a
    // request-log entry fits again.
    store.cap_pages(1 << 30);
    tokio::time::sleep(
        super::super::sqlite::space::FULL_HOLD + std::time::Duration::from_millis(1100),
    )
    .await;
    assert!(store.try_send(request("after", 1)));
    store.flush().await.unwrap();
    assert!(!store.is_full());
    assert_eq!(ids(store.recent_requests(1).await.unwrap()), ["after"]);
    let charged = store.ledger_totals().await.unwrap()["alice"].charged;
    assert_eq!(charged, settles, "every settle is in the ledger");
}

#[test]
fn v5_applies_after_whatever_came_before_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, applied_ms INTEGER NOT NULL);").unwrap();
    // The SQL migrations v1–v3 only, as a database from before the step functions.
    for (i, m) in MIGRATIONS.iter().take(3).enumerate() {
        let crate::store::sqlite::schema::Migration::Sql(sql) = m else {
            panic!("v{} is SQL", i + 1)
        };
        conn.execute_batch(sql).unwrap();
        conn.execute("INSERT INTO schema_version VALUES (?1, 0)", [i as i64 + 1])
            .unwrap();
    }
    drop(conn);
    let versions = |path: &str| -> Vec<i64> {
        let conn = Connection::open(path).unwrap();
        let mut st = conn
            .prepare("SELECT version FROM schema_version ORDER BY version")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    drop(Store::open(&path).unwrap());
    let versions_now = versions(&path);
    assert_eq!(versions_now.last(), Some(&SCHEMA_VERSION));
    assert!(versions_now.contains(&5), "{versions_now:?}");
    drop(Store::open(&path).unwrap()); // idempotent
    assert_eq!(versions(&path), versions_now);
    // A version the database does not record is applied (v4 of another build, say).
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE ledger_compacted; DELETE FROM schema_version WHERE version = 5;",
    )
    .unwrap();
    drop(conn);
    drop(Store::open(&path).unwrap());
    assert_eq!(versions(&path), versions_now);
    let conn = Connection::open(&path).unwrap();
    let count: i64 = conn
        .query_row("SELECT COUNT(*) FROM ledger_compacted", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 0);
}
