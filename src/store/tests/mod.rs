//! Tests for the store: shared fixtures and per-record round trips, ledger rules, recovery.

use rusqlite::Connection;

use super::*;

mod migrate;
mod migrate_v4;
mod retention;
mod writer;

pub(super) fn request(id: &str, ts_ms: i64) -> RequestRecord {
    RequestRecord {
        id: id.to_owned(),
        ts_ms,
        client: "team-a".into(),
        group: "default".into(),
        public_model: "gpt-x".into(),
        upstream_model: "gpt-x-2025".into(),
        path: "/v1/chat/completions".into(),
        stream: true,
        attempts: vec![
            AttemptRecord {
                channel: "a".into(),
                key_index: 1,
                upstream_status: Some(503),
                error_class: "upstream_5xx".into(),
                latency_ms: 12,
                possibly_charged: false,
                translation: None,
            },
            AttemptRecord {
                channel: "b".into(),
                key_index: 0,
                upstream_status: None,
                error_class: "ok".into(),
                latency_ms: 340,
                possibly_charged: true,
                translation: Some("openai->anthropic".into()),
            },
        ],
        chain: "a->b".into(),
        final_status: 200,
        error_code: None,
        sticky_kind: Some("conversation".into()),
        sticky_hit: Some(false),
        fallback: true,
        failed_over: true,
        prompt_tokens: 11,
        completion_tokens: 22,
        cached_tokens: 3,
        usage_estimated: false,
        stream_outcome: Some("complete".into()),
        trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
        latency_ms: 360,
    }
}

pub(super) fn entry(request_id: &str, client: &str, kind: LedgerKind, amount: i64) -> LedgerEntry {
    LedgerEntry {
        request_id: request_id.into(),
        client: client.into(),
        kind,
        amount,
        ts_ms: 1_000,
        foldable: false,
    }
}

pub(super) fn state(channel: &str, key: Option<&str>, disabled: bool, reason: &str) -> StateRow {
    StateRow {
        channel: channel.into(),
        key: key.map_or(StateKey::Channel, |k| StateKey::Key(k.into())),
        disabled,
        reason: reason.into(),
        ts_ms: 42,
        auto: false,
    }
}

pub(super) fn db_path(dir: &tempfile::TempDir) -> String {
    dir.path().join("sy.db").to_string_lossy().into_owned()
}

/// Holds the database write lock from another connection until dropped / rolled back.
pub(super) fn blocker(path: &str) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

#[tokio::test]
async fn request_log_round_trips_in_memory() {
    let store = Store::open(":memory:").unwrap();
    let rec = request("r1", 100);
    assert!(store.try_send(rec.clone()));
    store.flush().await.unwrap();
    assert_eq!(store.recent_requests(10).await.unwrap(), vec![rec]);
    assert_eq!(store.stats().written, 1);
    assert_eq!(store.dropped(), 0);
}

#[tokio::test]
async fn memory_stores_are_independent() {
    let store_a = Store::open(":memory:").unwrap();
    let store_b = Store::open(":memory:").unwrap();
    assert!(store_a.try_send(request("only-a", 1)));
    store_a.flush().await.unwrap();
    store_b.flush().await.unwrap();
    assert_eq!(store_a.request_count().await.unwrap(), 1);
    assert_eq!(store_b.request_count().await.unwrap(), 0);
}

#[tokio::test]
async fn recent_requests_newest_first_with_limit() {
    let store = Store::open(":memory:").unwrap();
    for (id, ts) in [("r1", 10), ("r2", 30), ("r3", 20), ("r4", 30), ("r5", 5)] {
        assert!(store.try_send(request(id, ts)));
    }
    store.flush().await.unwrap();
    let ids: Vec<String> = store
        .recent_requests(3)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    // Newest first means the most recently written (finished) request first, whatever
    // its start timestamp.
    assert_eq!(ids, ["r5", "r4", "r3"]);
    assert_eq!(store.recent_requests(100).await.unwrap().len(), 5);
    assert!(store.recent_requests(0).await.unwrap().is_empty());
}

#[tokio::test]
async fn ledger_replays_are_ignored_and_totals_follow_sign_convention() {
    let store = Store::open(":memory:").unwrap();
    let ops = [
        entry("q1", "alice", LedgerKind::Precharge, 100),
        entry("q1", "alice", LedgerKind::Settle, 20),
        entry("q1", "alice", LedgerKind::Settle, 999), // replayed settle
        entry("q1", "alice", LedgerKind::Refund, 100), // late refund after settle
        entry("q1", "alice", LedgerKind::Precharge, 100), // replayed precharge
        entry("q2", "alice", LedgerKind::Precharge, 50),
        entry("q2", "alice", LedgerKind::Settle, -30),
        entry("q3", "bob", LedgerKind::Precharge, 70),
        entry("q3", "bob", LedgerKind::Refund, 70),
        entry("q3", "bob", LedgerKind::Refund, 70), // replayed refund
        entry("q3", "bob", LedgerKind::Settle, 5),  // late settle after refund
    ];
    for op in ops {
        store.send_durable_async(op).await.unwrap();
    }
    store.flush().await.unwrap();
    let totals = store.ledger_totals().await.unwrap();
    assert_eq!(totals.len(), 2);
    assert_eq!(
        totals["alice"],
        LedgerTotals {
            charged: 100 + 20 + 50 - 30,
            refunded: 0
        }
    );
    assert_eq!(
        totals["bob"],
        LedgerTotals {
            charged: 0,
            refunded: 70
        }
    );
    let q1 = store.ledger_for_request("q1").await.unwrap();
    assert_eq!(
        q1.iter().map(|e| (e.kind, e.amount)).collect::<Vec<_>>(),
        [(LedgerKind::Precharge, 100), (LedgerKind::Settle, 20)]
    );
    assert_eq!(store.dropped(), 0);
}

#[tokio::test]
async fn dangling_precharges_are_found() {
    let store = Store::open(":memory:").unwrap();
    for op in [
        entry("open1", "alice", LedgerKind::Precharge, 10),
        entry("settled", "alice", LedgerKind::Precharge, 10),
        entry("settled", "alice", LedgerKind::Settle, 0),
        entry("refunded", "bob", LedgerKind::Precharge, 10),
        entry("refunded", "bob", LedgerKind::Refund, 10),
        entry("open2", "bob", LedgerKind::Precharge, 25),
        entry("trusted", "carol", LedgerKind::Settle, 40),
    ] {
        store.send_durable(op).unwrap();
    }
    store.flush().await.unwrap();
    let dangling = store.dangling_precharges().await.unwrap();
    assert_eq!(
        dangling,
        vec![
            entry("open1", "alice", LedgerKind::Precharge, 10),
            entry("open2", "bob", LedgerKind::Precharge, 25),
        ]
    );
    // Refunding at start-up closes them.
    store
        .send_durable(entry("open1", "alice", LedgerKind::Refund, 10))
        .unwrap();
    store.flush().await.unwrap();
    assert_eq!(store.dangling_precharges().await.unwrap().len(), 1);
}

#[tokio::test]
async fn channel_states_upsert_and_enable_deletes() {
    let store = Store::open(":memory:").unwrap();
    assert!(store.try_send(state("a", None, true, "401 from upstream")));
    assert!(store.try_send(state("a", Some("f2"), true, "quota exhausted")));
    assert!(store.try_send(state("b", None, true, "manual")));
    assert!(store.try_send(state("a", None, true, "manual")));
    assert!(store.try_send(state("b", None, false, "")));
    assert!(store.try_send(state("c", None, false, ""))); // enabling an unknown one is a no-op
    store.flush().await.unwrap();
    assert_eq!(
        store.disabled_states().await.unwrap(),
        vec![
            state("a", None, true, "manual"),
            state("a", Some("f2"), true, "quota exhausted"),
        ]
    );
}

/// A binding is (client, task id, channel): another client's equal id, or the same id
/// from a second channel, is a row of its own (B-tenants).
#[tokio::test]
async fn task_bindings_are_per_client_and_channel() {
    let store = Store::open(":memory:").unwrap();
    let bind = |client: &str, task: &str, ch: &str, ts_ms| TaskBinding {
        client: client.into(),
        task_id: task.into(),
        channel: ch.into(),
        ts_ms,
    };
    assert!(store.try_send(bind("alice", "t1", "a", 1)));
    assert!(store.try_send(bind("alice", "t2", "c", 2)));
    assert!(store.try_send(bind("bob", "t1", "b", 3)));
    assert!(store.try_send(bind("alice", "t1", "d", 4)));
    store.flush().await.unwrap();
    assert_eq!(
        store.task_channels("alice", "t1").await.unwrap(),
        ["d", "a"]
    );
    assert_eq!(store.task_channels("bob", "t1").await.unwrap(), ["b"]);
    assert_eq!(store.task_channels("alice", "t2").await.unwrap(), ["c"]);
    assert!(store.task_channels("bob", "t2").await.unwrap().is_empty());
    assert!(store
        .task_channels("alice", "nope")
        .await
        .unwrap()
        .is_empty());
    // Re-binding the same triple refreshes it instead of adding a row.
    assert!(store.try_send(bind("alice", "t1", "a", 5)));
    store.flush().await.unwrap();
    assert_eq!(
        store.task_channels("alice", "t1").await.unwrap(),
        ["a", "d"]
    );
}

#[tokio::test]
async fn affinity_bindings_unexpired_only() {
    let store = Store::open(":memory:").unwrap();
    let bind = |k: &str, ch: &str, exp: i64| AffinityBinding {
        key: k.into(),
        channel: ch.into(),
        expires_ms: exp,
    };
    assert!(store.try_send(bind("k1", "a", 1_000)));
    assert!(store.try_send(bind("k2", "b", 3_000)));
    store.flush().await.unwrap();
    assert_eq!(
        store.affinity_bindings(2_000).await.unwrap(),
        vec![bind("k2", "b", 3_000)]
    );
    assert!(store.try_send(bind("k1", "c", 5_000)));
    store.flush().await.unwrap();
    assert_eq!(
        store.affinity_bindings(2_000).await.unwrap(),
        vec![bind("k1", "c", 5_000), bind("k2", "b", 3_000)]
    );
    assert!(store.affinity_bindings(5_000).await.unwrap().is_empty());
}

#[tokio::test]
async fn data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Store::open(&path).unwrap();
    assert!(store.try_send(request("r1", 5)));
    store
        .send_durable(entry("q1", "alice", LedgerKind::Precharge, 9))
        .unwrap();
    assert!(store.try_send(state("a", Some("f0"), true, "401")));
    store.flush().await.unwrap();
    store.shutdown().await.unwrap();

    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.recent_requests(10).await.unwrap(),
        vec![request("r1", 5)]
    );
    assert_eq!(store.dangling_precharges().await.unwrap().len(), 1);
    assert_eq!(
        store.disabled_states().await.unwrap(),
        vec![state("a", Some("f0"), true, "401")]
    );
    let conn = Connection::open(&path).unwrap();
    let versions: i64 = conn
        .query_row("SELECT MAX(version) FROM schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(versions, SCHEMA_VERSION);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}
