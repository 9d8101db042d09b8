//! Schema v4 (B-key-fingerprint): disabled keys by fingerprint, task bindings by (client, id, channel);
//! a v3 database keeps every row in a form the new code can resolve.

use rusqlite::Connection;

use super::migrate::apply_up_to;
use super::*;

fn v3_database(path: &str) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE schema_version (version INTEGER NOT NULL PRIMARY KEY, applied_ms INTEGER NOT NULL);",
    )
    .unwrap();
    apply_up_to(&conn, 3);
    conn.execute_batch(
        "INSERT INTO channel_state VALUES ('a', -1, 'disabled by operator', 5, 0);
         INSERT INTO channel_state VALUES ('b', 2, 'upstream status 401', 6, 1);
         INSERT INTO task_binding VALUES ('task_1', 'old-ch', 7);",
    )
    .unwrap();
}

#[tokio::test]
async fn v3_rows_survive_as_legacy_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    v3_database(&path);
    let store = Store::open(&path).unwrap();
    let rows = store.disabled_states().await.unwrap();
    let keys: Vec<(&str, &StateKey, bool)> = rows
        .iter()
        .map(|r| (r.channel.as_str(), &r.key, r.auto))
        .collect();
    assert_eq!(
        keys,
        [
            ("a", &StateKey::Channel, false),
            ("b", &StateKey::LegacyIndex(2), true)
        ]
    );
    // A legacy row is replaced by its fingerprint row (what start-up does).
    let legacy = StateRow {
        disabled: false,
        ..rows[1].clone()
    };
    let by_fp = StateRow {
        key: StateKey::Key("00ff".into()),
        ..rows[1].clone()
    };
    store.send_durable(legacy).unwrap();
    store.send_durable(by_fp.clone()).unwrap();
    store.flush().await.unwrap();
    assert_eq!(
        store.disabled_states().await.unwrap(),
        vec![rows[0].clone(), by_fp]
    );

    // The old task binding has no known owner: it is kept, after any owned binding.
    assert_eq!(
        store.task_channels("anyone", "task_1").await.unwrap(),
        ["old-ch"]
    );
    store
        .send_durable(TaskBinding {
            client: "alice".into(),
            task_id: "task_1".into(),
            channel: "new-ch".into(),
            ts_ms: 1,
        })
        .unwrap();
    store.flush().await.unwrap();
    assert_eq!(
        store.task_channels("alice", "task_1").await.unwrap(),
        ["new-ch", "old-ch"]
    );
    assert_eq!(
        store.task_channels("bob", "task_1").await.unwrap(),
        ["old-ch"]
    );
    store.shutdown().await.unwrap();
}
