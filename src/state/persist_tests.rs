//! Durable state rows (R7.2): a full store queue delays them, never drops them,
//! and the last change of a (channel, key) is the one stored.
use std::time::Duration;

use rusqlite::Connection;

use super::*;
use crate::store::{RequestRecord, StoreOptions};

fn row(key: StateKey, disabled: bool, reason: &str) -> Row {
    Row {
        channel: "c".into(),
        key,
        disabled,
        reason: reason.into(),
        ts_ms: 1,
        auto: true,
    }
}

/// Fill the queue of a store whose writer is stuck on a held database lock; returns the
/// fillers dropped.
fn fill(store: &Store) -> u64 {
    // First let the writer take one op and block on the lock, so the queue stays full.
    assert!(store.try_send(RequestRecord::default()));
    while store.queue_len() > 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut filled = 0;
    while store.try_send(RequestRecord::default()) {
        filled += 1;
        assert!(filled < 100, "queue never filled");
    }
    store.dropped()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_delays_state_rows_and_never_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db").to_string_lossy().into_owned();
    let opts = StoreOptions {
        queue_capacity: 4,
        max_batch: 4,
        busy_timeout: Duration::from_secs(30),
    };
    let store = Store::open_with(&path, opts).unwrap();
    let lock = Connection::open(&path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let dropped_fillers = fill(&store);
    assert!(dropped_fillers >= 1);

    let persister = Persister::default();
    let key = StateKey::Key("00aa".into());
    persister.send(&store, row(key.clone(), true, "upstream status 401"));
    persister.send(&store, row(StateKey::Channel, true, "every key disabled"));
    // An operator enable right after: the key's pending row is replaced, not queued twice.
    persister.send(&store, row(key.clone(), false, ""));
    assert_eq!(persister.pending(), 2, "waiting, in order, not dropped");
    assert_eq!(store.dropped(), dropped_fillers, "no state row dropped");

    lock.execute_batch("ROLLBACK").unwrap();
    for _ in 0..200 {
        if persister.pending() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(persister.pending(), 0);
    store.flush().await.unwrap();
    let rows = store.disabled_states().await.unwrap();
    assert_eq!(
        rows,
        vec![row(StateKey::Channel, true, "every key disabled")],
        "the key's last change (enabled) wins"
    );
    assert_eq!(store.dropped(), dropped_fillers);
}

/// With room in the queue a row goes straight to it, in order with later ones.
#[tokio::test]
async fn with_room_rows_are_queued_at_once_in_order() {
    let store = Store::open(":memory:").unwrap();
    let persister = Persister::default();
    persister.send(&store, row(StateKey::Channel, true, "a"));
    assert_eq!(persister.pending(), 0);
    persister.send(&store, row(StateKey::Channel, false, ""));
    persister.send(&store, row(StateKey::Channel, true, "b"));
    store.flush().await.unwrap();
    let rows = store.disabled_states().await.unwrap();
    assert_eq!(rows, vec![row(StateKey::Channel, true, "b")]);
}

/// Without a runtime (a blocking caller) a full queue is waited out in place.
#[test]
fn without_a_runtime_the_caller_waits_for_room() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db").to_string_lossy().into_owned();
    let opts = StoreOptions {
        queue_capacity: 2,
        max_batch: 2,
        busy_timeout: Duration::from_secs(30),
    };
    let store = Store::open_with(&path, opts).unwrap();
    let lock = Connection::open(&path).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let dropped = fill(&store);
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        lock.execute_batch("ROLLBACK").unwrap();
    });
    Persister::default().send(&store, row(StateKey::Channel, true, "x"));
    release.join().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(store.flush()).unwrap();
    let rows = rt.block_on(store.disabled_states()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(store.dropped(), dropped);
}
