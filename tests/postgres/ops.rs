//! Every write op and read of the store, on PostgreSQL.

use std::time::Duration;

use switchyard::store::{AffinityBinding, StateKey, StateRow, TaskBinding, WriteOp};

use super::support::external::Postgres;
use super::{int, open, request};

#[tokio::test]
async fn every_write_and_read_round_trips() {
    let pg = Postgres::start();
    let store = open(&pg, Duration::from_secs(30)).await;
    assert_eq!(store.backend(), "postgres");
    for i in 0..3 {
        assert!(store.try_send(request(&format!("r{i}"), 1000 + i)));
    }
    let fp = "ab".repeat(16);
    let state = |channel: &str, key: StateKey, disabled: bool| StateRow {
        channel: channel.into(),
        key,
        disabled,
        reason: "operator".into(),
        ts_ms: 5,
        auto: true,
    };
    store
        .send_durable_async(state("a", StateKey::Key(fp.clone()), true))
        .await
        .unwrap();
    store
        .send_durable_async(state("a", StateKey::Channel, true))
        .await
        .unwrap();
    store
        .send_durable_async(state("b", StateKey::Channel, true))
        .await
        .unwrap();
    store
        .send_durable_async(state("b", StateKey::Channel, false))
        .await
        .unwrap();
    for (client, ch, ts) in [("alice", "x", 1), ("alice", "y", 2), ("bob", "z", 3)] {
        let binding = TaskBinding {
            client: client.into(),
            task_id: "t1".into(),
            channel: ch.into(),
            ts_ms: ts,
        };
        store.send_durable_async(binding).await.unwrap();
    }
    let now = switchyard::store::now_ms();
    let bind = |k: &str, ch: &str, exp: i64| AffinityBinding {
        key: k.into(),
        channel: ch.into(),
        expires_ms: exp,
    };
    store.try_send(bind("k1", "a", now + 60_000));
    store.try_send(WriteOp::AffinityBindings(vec![
        bind("k2", "b", now + 60_000),
        bind("k3", "b", now - 1),
        bind("k1", "c", now + 90_000),
    ]));
    store.flush().await.unwrap();

    let rows = store.recent_requests(10).await.unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(
        rows[0],
        request("r2", 1002),
        "newest first, every field kept"
    );
    assert_eq!(store.request_count().await.unwrap(), 3);

    let states = store.disabled_states().await.unwrap();
    let keys: Vec<_> = states
        .iter()
        .map(|s| (s.channel.as_str(), &s.key))
        .collect();
    assert_eq!(
        keys,
        vec![("a", &StateKey::Channel), ("a", &StateKey::Key(fp.clone()))],
        "b was enabled again; a's key is kept by fingerprint"
    );
    assert!(states.iter().all(|s| s.auto && s.reason == "operator"));

    assert_eq!(
        store.task_channels("alice", "t1").await.unwrap(),
        ["y", "x"]
    );
    assert_eq!(store.task_channels("bob", "t1").await.unwrap(), ["z"]);
    assert!(store.task_channels("eve", "t1").await.unwrap().is_empty());

    let bindings = store.affinity_bindings(now).await.unwrap();
    assert_eq!(
        bindings,
        vec![bind("k1", "c", now + 90_000), bind("k2", "b", now + 60_000)]
    );
    assert_eq!(int(&pg, "SELECT count(*) FROM affinity_binding"), 3);
    store.shutdown().await.unwrap();
}

/// Client- and upstream-chosen strings with a NUL byte (PostgreSQL text cannot hold one) are
/// stored with U+FFFD, and the rest of their batch is written normally.
#[tokio::test]
async fn a_nul_byte_does_not_fail_a_batch() {
    let pg = Postgres::start();
    let store = open(&pg, Duration::from_secs(30)).await;
    let mut hostile = request("h\0", 1);
    hostile.public_model = "gpt\0x".into();
    store.try_send(request("ok1", 1));
    store.try_send(hostile);
    store.try_send(request("ok2", 2));
    let binding = TaskBinding {
        client: "alice".into(),
        task_id: "t\0x1".into(),
        channel: "x".into(),
        ts_ms: 1,
    };
    store.send_durable_async(binding).await.unwrap();
    store.flush().await.unwrap();
    assert_eq!(store.request_count().await.unwrap(), 3);
    assert_eq!(store.dropped(), 0);
    let rows = store.recent_requests(3).await.unwrap();
    assert!(
        rows.iter().any(|r| &*r.public_model == "gpt\u{fffd}x"),
        "{rows:?}"
    );
    assert_eq!(store.task_channels("alice", "t\0x1").await.unwrap(), ["x"]);
}

/// Two replicas whose configs list a channel's keys in different orders (two generations
/// reloading at once) write and read the same rows: state is keyed by channel name and key
/// fingerprint, never by position.
#[tokio::test]
async fn two_stores_share_state_by_name_and_fingerprint() {
    let pg = Postgres::start();
    let one = open(&pg, Duration::from_secs(30)).await;
    let two = open(&pg, Duration::from_secs(30)).await;
    let (k1, k2) = ("11".repeat(16), "22".repeat(16));
    let row = |key: &str, disabled: bool| StateRow {
        channel: "a".into(),
        key: StateKey::Key(key.into()),
        disabled,
        reason: "r".into(),
        ts_ms: 1,
        auto: false,
    };
    let (a, b) = tokio::join!(
        one.send_durable_async(row(&k1, true)),
        two.send_durable_async(row(&k2, true))
    );
    a.unwrap();
    b.unwrap();
    one.flush().await.unwrap();
    two.flush().await.unwrap();
    two.send_durable_async(row(&k1, false)).await.unwrap();
    two.flush().await.unwrap();
    let seen = one.disabled_states().await.unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].key, StateKey::Key(k2.clone()));
    assert_eq!(two.disabled_states().await.unwrap(), seen);
}

/// Retention: rows beyond `max_rows` and older than `max_age` go; old closed ledger rows are
/// folded into the client's totals, which do not change.
#[tokio::test]
async fn retention_prunes_the_log_and_folds_the_ledger() {
    use switchyard::store::LedgerKind::*;
    let pg = Postgres::start();
    let store = open(&pg, Duration::from_secs(30)).await;
    for i in 0..20 {
        store.try_send(request(&format!("r{i}"), i));
    }
    let quota = store.quota().unwrap();
    for i in 0..5 {
        let request_id = format!("s{i}");
        assert!(
            quota
                .debit(&request_id, "alice", 100, 10_000, 1)
                .await
                .unwrap()
                .admitted
        );
        let entry = super::entry(
            &request_id,
            "alice",
            if i % 2 == 0 { Settle } else { Refund },
            100,
        );
        store.send_durable_async(entry).await.unwrap();
    }
    assert!(
        quota
            .debit("open", "alice", 100, 10_000, 1)
            .await
            .unwrap()
            .admitted
    );
    store.flush().await.unwrap();
    let before = store.ledger_totals().await.unwrap()["alice"];
    pg.psql("UPDATE ledger SET ts_ms = 1");
    let pruned = store.prune(None, Some(8), 1000, 0).await.unwrap();
    assert_eq!(pruned.request_log, 12);
    assert_eq!(store.request_count().await.unwrap(), 8);
    let pruned = store.prune(Some(15), None, 1000, 0).await.unwrap();
    assert_eq!(pruned.request_log, 3, "r12..r14 were older than 15");
    assert_eq!(pruned.ledger, 10, "five closed sessions, two rows each");
    assert_eq!(store.ledger_totals().await.unwrap()["alice"], before);
    assert_eq!(
        int(&pg, "SELECT count(*) FROM ledger"),
        1,
        "the open precharge stays"
    );
    assert_eq!(before.charged, 3 * 200 + 100, "matches the balance");
    assert_eq!(
        int(
            &pg,
            "SELECT charged FROM quota_balance WHERE client = 'alice'"
        ),
        before.charged
    );
}
