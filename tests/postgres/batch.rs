//! Debits of one client taken in batches (B-pg-pool): concurrent debits become fewer
//! statements and commits than requests, each decided as serial application would, and the
//! books stay exact when waiters leave while queued or while their batch is in flight.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use switchyard::store::LedgerKind::{Refund, Settle};
use switchyard::store::{PgOptions, Quota, Store};

use super::support::external::Postgres;
use super::{entry, int, open};

/// `n` debits of `amount(i)` for `client` released together; each one's outcome by session.
async fn race(
    q: &Quota,
    client: &str,
    n: usize,
    limit: i64,
    amount: fn(usize) -> i64,
) -> HashMap<String, (i64, bool)> {
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (quota, barrier, client) = (q.clone(), barrier.clone(), client.to_string());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let debit_id = format!("{client}-{i}");
            let debit = quota
                .debit(&debit_id, &client, amount(i), limit, 1)
                .await
                .unwrap();
            (debit_id, (amount(i), debit.admitted))
        }));
    }
    let mut out = HashMap::new();
    for t in tasks {
        let (s, r) = t.await.unwrap();
        out.insert(s, r);
    }
    out
}

/// Commits that wrote `client`'s precharges (rows one transaction wrote share its xmin).
fn commits(pg: &Postgres, client: &str) -> i64 {
    int(
        pg,
        &format!("SELECT count(DISTINCT xmin::text) FROM ledger WHERE kind = 'precharge' AND client = '{client}'"),
    )
}

/// 300 concurrent debits of one client: batches form (fewer statements and commits than
/// debits), exactly the serial number is admitted, no refusal was false, and after every
/// settle and refund the balance is exactly the settled cost.
#[tokio::test]
async fn concurrent_debits_of_one_client_are_batched_and_settle_exactly() {
    let pg = Postgres::start();
    let store = open(&pg, Duration::from_secs(30)).await;
    let quota = store.quota().unwrap();
    // Equal amounts: exactly limit / amount pass.
    let out = race(&quota, "alice", 300, 7 * 120, |_| 7).await;
    let admitted = out.values().filter(|(_, ok)| *ok).count();
    assert_eq!(admitted, 120);
    let statements = quota.debit_statements();
    assert!(statements < 300, "{statements} statements for 300 debits");
    let txs = commits(&pg, "alice");
    assert!(txs < 120, "{txs} commits for 120 admitted debits");
    assert_eq!(int(&pg, "SELECT count(*) FROM quota_lease"), 120);
    assert_eq!(quota.owned(), 120, "each admitted session is renewed");
    // Mixed amounts: the admitted sum fits, and every refusal could not have fit even in
    // the balance left at the end (greedy serial application refuses nothing that fits).
    let limit = 5_000;
    let out_b = race(&quota, "bob", 300, limit, |i| 1 + (i as i64 * 7919) % 40).await;
    let charged = int(
        &pg,
        "SELECT charged FROM quota_balance WHERE client = 'bob'",
    );
    let sum: i64 = out_b.values().filter(|(_, ok)| *ok).map(|(a, _)| a).sum();
    assert_eq!(charged, sum);
    assert!(charged <= limit);
    for (s, (a, ok)) in &out_b {
        assert!(
            *ok || *a > limit - charged,
            "{s} ({a}) refused with {charged} of {limit} taken"
        );
    }
    // Every admitted session closes: even ones settle at 3, odd ones are refunded.
    let mut cost = 0;
    for (s, _) in out.iter().filter(|(_, (_, ok))| *ok) {
        let number: usize = s.rsplit('-').next().unwrap().parse().unwrap();
        if number.is_multiple_of(2) {
            store
                .send_durable_async(entry(s, "alice", Settle, 3 - 7))
                .await
                .unwrap();
            cost += 3;
        } else {
            store
                .send_durable_async(entry(s, "alice", Refund, 7))
                .await
                .unwrap();
        }
    }
    store.flush().await.unwrap();
    let balance = quota.balances().await.unwrap()["alice"];
    assert_eq!(balance.charged, cost, "exactly the settled cost");
    assert_eq!(
        int(
            &pg,
            "SELECT count(*) FROM quota_lease WHERE client = 'alice'"
        ),
        0
    );
}

/// `storage.debit_batch: 1` is the behaviour before batching: one statement per debit.
#[tokio::test]
async fn a_batch_of_one_sends_a_statement_per_debit() {
    let pg = Postgres::start();
    let opts = PgOptions {
        debit_batch: 1,
        ..PgOptions::default()
    };
    let store = Store::open_postgres(&pg.url(), opts).await.unwrap();
    let quota = store.quota().unwrap();
    let out = race(&quota, "alice", 60, 7 * 20, |_| 7).await;
    assert_eq!(out.values().filter(|(_, ok)| *ok).count(), 20);
    assert_eq!(quota.debit_statements(), 60);
    assert_eq!(commits(&pg, "alice"), 20);
}

/// Waiters that leave while queued behind a batch held by a row lock, or while their own
/// batch is in flight: once the lock goes and the unrenewed leases are swept, every
/// precharge has exactly one terminal entry and the balance is back to zero.
#[tokio::test]
async fn waiters_that_leave_mid_batch_leave_the_books_exact() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(1);
    let store = open(&pg, ttl).await;
    let quota = store.quota().unwrap();
    assert!(
        quota
            .debit("seed", "alice", 1, 1_000_000, 1)
            .await
            .unwrap()
            .admitted
    );
    store
        .send_durable_async(entry("seed", "alice", Refund, 1))
        .await
        .unwrap();
    store.flush().await.unwrap();
    // Another session holds the balance row: the first batch waits on it, the rest queue.
    let (locker, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    locker
        .batch_execute("BEGIN; SELECT 1 FROM quota_balance WHERE client = 'alice' FOR UPDATE")
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..40 {
        let quota = quota.clone();
        tasks.push(tokio::spawn(async move {
            quota
                .debit(&format!("c{i}"), "alice", 10, 1_000_000, 1)
                .await
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Half leave: the first ones ride the batch that waits on the lock, the later ones are
    // still queued.
    for t in tasks.iter().step_by(2) {
        t.abort();
    }
    locker.batch_execute("COMMIT").await.unwrap();
    let mut admitted = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        if let Ok(Ok(d)) = t.await {
            if d.admitted {
                admitted.push(format!("c{i}"));
            }
        }
    }
    assert!(!admitted.is_empty(), "the waiters that stayed are served");
    assert!(
        quota.owned() == admitted.len(),
        "only the sessions still waited for are renewed: {} of {}",
        quota.owned(),
        admitted.len()
    );
    for s in &admitted {
        store
            .send_durable_async(entry(s, "alice", Refund, 10))
            .await
            .unwrap();
    }
    store.flush().await.unwrap();
    // What committed for a waiter that left is not renewed: swept once its lease expires.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    quota.sweep(2).await.unwrap();
    assert_eq!(int(&pg, "SELECT count(*) FROM quota_lease"), 0);
    assert_eq!(
        int(&pg, "SELECT count(*) FROM ledger WHERE kind = 'precharge'"),
        int(&pg, "SELECT count(*) FROM ledger WHERE kind <> 'precharge'"),
        "one terminal entry per precharge"
    );
    let balance = quota.balances().await.unwrap()["alice"];
    assert_eq!(balance.charged, 0, "every precharge came back: {balance:?}");
    assert_eq!(quota.owned(), 0);
}
