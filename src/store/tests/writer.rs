//! Writer-thread tests: batching, back-pressure, shutdown draining, bad rows.

use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::*;

/// A store on a database file of its own (the directory lives as long as the first value).
fn on_disk() -> (tempfile::TempDir, String, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let store = Store::open(&path).unwrap();
    (dir, path, store)
}

/// The ids of the stored requests, newest first.
async fn stored_ids(store: &Store) -> Vec<String> {
    let recent = store.recent_requests(100).await.unwrap();
    recent.into_iter().map(|r| r.id).collect()
}

/// Run `sql` on the database at `path` through a connection of its own (a test's triggers).
fn on_the_side(path: &str, sql: &str) {
    Connection::open(path).unwrap().execute_batch(sql).unwrap();
}

#[tokio::test]
async fn ten_thousand_logs_are_batched() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let opts = StoreOptions {
        queue_capacity: 20_000,
        ..StoreOptions::default()
    };
    let store = Store::open_with(&path, opts).unwrap();
    // Hold the writer back so the whole load is queued, then let it drain.
    let lock = blocker(&path);
    let started = Instant::now();
    for i in 0..10_000 {
        assert!(store.try_send(request(&format!("r{i}"), i)));
    }
    lock.execute_batch("ROLLBACK").unwrap();
    store.flush().await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(store.request_count().await.unwrap(), 10_000);
    let stats = store.stats();
    assert_eq!(stats.written, 10_000);
    assert_eq!(stats.dropped, 0);
    assert_eq!(stats.queued, 0);
    // 10k ops in batches of at most 1024: one blocked first batch plus ~10 full ones.
    assert!(stats.batches <= 12, "batches = {}", stats.batches);
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
}

#[tokio::test]
async fn full_queue_drops_and_counts_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let opts = StoreOptions {
        queue_capacity: 4,
        max_batch: 4,
        busy_timeout: Duration::from_secs(30),
    };
    let store = Store::open_with(&path, opts).unwrap();
    let lock = blocker(&path);
    let started = Instant::now();
    let accepted = (0..100)
        .filter(|i| store.try_send(request(&format!("r{i}"), *i)))
        .count() as u64;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "try_send blocked"
    );
    // At most one batch in the stuck writer plus a full queue.
    assert!((4..=8).contains(&accepted), "accepted = {accepted}");
    assert_eq!(store.dropped(), 100 - accepted);
    lock.execute_batch("ROLLBACK").unwrap();
    store.flush().await.unwrap();
    assert_eq!(store.request_count().await.unwrap(), accepted);
    assert_eq!(store.dropped(), 100 - accepted);
}

#[tokio::test]
async fn close_and_drop_write_everything_queued() {
    let (_dir, path, store) = on_disk();
    for i in 0..1_000 {
        assert!(store.try_send(request(&format!("c{i}"), i)));
    }
    store.close(); // no flush: close must drain the queue
    let store = Store::open(&path).unwrap();
    for i in 0..500 {
        assert!(store.try_send(request(&format!("d{i}"), i)));
    }
    drop(store); // last handle: same guarantee
    let store = Store::open(&path).unwrap();
    assert_eq!(store.request_count().await.unwrap(), 1_500);
}

#[tokio::test]
async fn sends_after_close_are_counted() {
    let store = Store::open(":memory:").unwrap();
    let other = store.clone();
    store.close();
    assert!(!other.try_send(request("late", 1)));
    assert!(matches!(
        other.send_durable(entry("q", "a", LedgerKind::Refund, 1)),
        Err(StoreError::Closed)
    ));
    assert!(matches!(other.flush().await, Err(StoreError::Closed)));
    assert_eq!(other.dropped(), 2);
    // Reads still work on the remaining handle.
    assert_eq!(other.request_count().await.unwrap(), 0);
}

#[tokio::test]
async fn bad_rows_are_skipped_and_writer_keeps_going() {
    let (_dir, path, store) = on_disk();
    on_the_side(
        &path,
        "CREATE TRIGGER reject_row BEFORE INSERT ON request_log WHEN NEW.id = 'bad'
           BEGIN SELECT RAISE(ABORT, 'bad row'); END;
         CREATE TRIGGER poison_tx BEFORE INSERT ON request_log WHEN NEW.id = 'poison'
           BEGIN SELECT RAISE(ROLLBACK, 'poisoned transaction'); END;",
    );

    for id in ["g1", "bad", "g2"] {
        assert!(store.try_send(request(id, 1)));
    }
    store.flush().await.unwrap();
    assert_eq!(store.request_count().await.unwrap(), 2);
    assert_eq!(store.dropped(), 1);

    // A transaction-level failure is retried once, then its batch is dropped.
    for id in ["g3", "poison"] {
        assert!(store.try_send(request(id, 2)));
    }
    store.flush().await.unwrap();
    assert!(store.try_send(request("g4", 3)));
    store.flush().await.unwrap();
    let ids = stored_ids(&store).await;
    assert!(!ids.contains(&"poison".to_owned()));
    assert_eq!(ids.first().map(String::as_str), Some("g4"));
    // Every op is either stored or counted as dropped.
    assert_eq!(ids.len() as u64 + store.dropped(), 6);
}

/// R11.2 with `batch_fold`: the settles of clients without a quota leave no ledger rows,
/// yet every balance is the same — after a reopen too — and a quota client's entries are
/// still rows.
#[tokio::test]
async fn foldable_settles_leave_no_rows_and_the_same_totals_after_a_reopen() {
    let (_dir, path, store) = on_disk();
    let folded = |id: &str, amount| LedgerEntry {
        foldable: true,
        ..entry(id, "free", LedgerKind::Settle, amount)
    };
    assert!(store.try_send(entry("q1", "quota", LedgerKind::Precharge, 100)));
    assert!(store.try_send(folded("u1", 33)));
    assert!(store.try_send(request("r1", 1)));
    assert!(store.try_send(entry("q1", "quota", LedgerKind::Settle, -40)));
    assert!(store.try_send(folded("u2", 10)));
    store.flush().await.unwrap();
    assert!(store.try_send(folded("u3", 7)));
    store.flush().await.unwrap();

    assert!(store.ledger_for_request("u1").await.unwrap().is_empty());
    assert_eq!(store.ledger_for_request("q1").await.unwrap().len(), 2);
    assert_eq!(store.request_count().await.unwrap(), 1);
    let stats = store.stats();
    assert_eq!((stats.written, stats.dropped), (6, 0));
    let expect = |totals: &std::collections::HashMap<String, LedgerTotals>| {
        assert_eq!(totals["free"].charged, 50);
        assert_eq!(totals["quota"].charged, 60);
    };
    expect(&store.ledger_totals().await.unwrap());
    let compacted: (i64, i64) = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT charged, entries FROM ledger_compacted WHERE client = 'free'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(compacted, (50, 3));
    store.shutdown().await.unwrap();
    let store = Store::open(&path).unwrap();
    expect(&store.ledger_totals().await.unwrap());
}

/// A batch whose fold fails is not half-applied: its rows and its folded settles are
/// dropped together (retried once, then counted), and the next batch folds again.
#[tokio::test]
async fn a_failed_fold_fails_its_whole_batch() {
    let (_dir, path, store) = on_disk();
    on_the_side(
        &path,
        "CREATE TRIGGER poison_fold BEFORE INSERT ON ledger_compacted WHEN NEW.charged = 13
           BEGIN SELECT RAISE(ROLLBACK, 'poisoned fold'); END;",
    );
    let folded = |id: &str, amount| LedgerEntry {
        foldable: true,
        ..entry(id, "free", LedgerKind::Settle, amount)
    };
    assert!(store.try_send(request("lost", 1)));
    assert!(store.try_send(folded("u1", 13)));
    store.flush().await.unwrap();
    assert_eq!(store.request_count().await.unwrap(), 0);
    assert_eq!(store.dropped(), 2);
    assert!(store.try_send(folded("u2", 5)));
    store.flush().await.unwrap();
    assert_eq!(store.ledger_totals().await.unwrap()["free"].charged, 5);
}

/// Row `i` of a batch with every field its own, so that a parameter bound to the wrong
/// column, or a row read for another, shows.
fn distinct(i: u64) -> RequestRecord {
    let mut r = request(&format!("m{i}"), 1_000 + i as i64);
    r.client = format!("client-{i}").into();
    r.group = format!("group-{i}").into();
    r.public_model = format!("model-{i}").into();
    r.upstream_model = format!("upstream-{i}").into();
    r.path = format!("/v1/path-{i}").into();
    r.stream = i.is_multiple_of(2);
    r.attempts[0].key_index = i as u32;
    r.attempts[1].latency_ms = 7 * i;
    r.chain = format!("a->b-{i}").into();
    r.final_status = 200 + (i % 3) as u16;
    r.error_code = (i % 4 == 1).then(|| format!("code-{i}"));
    r.sticky_kind = i.is_multiple_of(3).then(|| format!("kind-{i}"));
    r.sticky_hit = (!i.is_multiple_of(5)).then_some(i % 2 == 1);
    r.fallback = i % 3 == 1;
    r.prompt_tokens = 10 * i;
    r.completion_tokens = 10 * i + 1;
    r.cached_tokens = i;
    r.usage_estimated = i % 2 == 1;
    r.stream_outcome = i
        .is_multiple_of(2)
        .then(|| std::borrow::Cow::Owned(format!("outcome-{i}")));
    r.latency_ms = 100 + i;
    r.trace_id = (i % 3 != 2).then(|| format!("{i:032x}"));
    r.with_failed_over()
}

/// R12.1: each row of a batch reads back as it was written, field for field, in order.
#[tokio::test]
async fn a_batch_of_rows_reads_back_field_for_field() {
    let (_dir, path, store) = on_disk();
    // Held back, so the rows arrive as one batch.
    let lock = blocker(&path);
    let written: Vec<RequestRecord> = (0..37).map(distinct).collect();
    for r in &written {
        assert!(store.try_send(r.clone()));
    }
    lock.execute_batch("ROLLBACK").unwrap();
    store.flush().await.unwrap();
    let mut read = store.recent_requests(100).await.unwrap();
    read.reverse();
    assert_eq!(read, written);
    assert_eq!(store.dropped(), 0);
}

/// Rows that fail inside a large batch lose those rows only: the batch's other rows are
/// stored, in order, and the lost rows are counted.
#[tokio::test]
async fn bad_rows_in_a_large_batch_lose_those_rows_only() {
    let (_dir, path, store) = on_disk();
    on_the_side(
        &path,
        "CREATE TRIGGER reject_row BEFORE INSERT ON request_log WHEN NEW.id IN ('m5', 'm20')
           BEGIN SELECT RAISE(ABORT, 'bad row'); END;",
    );
    let lock = blocker(&path);
    for i in 0..40 {
        assert!(store.try_send(distinct(i)));
    }
    lock.execute_batch("ROLLBACK").unwrap();
    store.flush().await.unwrap();
    let mut ids = stored_ids(&store).await;
    ids.reverse();
    let expected: Vec<String> = (0..40)
        .filter(|i| ![5, 20].contains(i))
        .map(|i| format!("m{i}"))
        .collect();
    assert_eq!(ids, expected);
    assert_eq!(store.dropped(), 2);
}
