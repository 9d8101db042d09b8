//! The shared quota across three real replicas (R11.3, R17.1) and a replica killed with
//! `kill -9` mid-request (R17.2).

use std::time::Duration;

use super::support::external::Postgres;
use super::support::{MockUpstream, ALICE};
use super::*;

/// Three replicas, requests round-robin, 60 at once for a client whose quota pays exactly 10:
/// exactly 10 are served, 50 get 402, and the books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_for_ten_serves_exactly_ten_across_three_replicas() {
    let pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = config(&pg, &mock, 10 * COST, false);
    let replicas: Vec<_> = (0..3)
        .map(|i| replica(dir.path(), &format!("r{i}"), &body))
        .collect();
    let http = http();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(60));
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (http, b) = (http.clone(), barrier.clone());
        let base = replicas[i % 3].base.clone();
        tasks.push(tokio::spawn(async move {
            b.wait().await;
            http.post(format!("{base}/v1/chat/completions"))
                .bearer_auth(ALICE)
                .json(&serde_json::json!({"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    let ok = codes.iter().filter(|c| **c == 200).count();
    let refused = codes.iter().filter(|c| **c == 429 || **c == 402).count();
    assert_eq!((ok, refused), (10, 50), "{codes:?}");
    // Settles are written off the response path: wait for the last one.
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM ledger WHERE kind = 'settle'"
        ) == 10)
        .await
    );
    let (charged, remaining) = books(&pg, 10 * COST);
    assert_eq!((charged, remaining), (10 * COST * 1_000_000, 0));
    assert_eq!(int(&pg, "SELECT count(*) FROM quota_lease"), 0);
    // Every replica's view converges on the shared balance (refreshed every second).
    for r in &replicas {
        let mut latest = account(&http, r).await;
        for _ in 0..30 {
            if latest["remaining_micro"] == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            latest = account(&http, r).await;
        }
        assert_eq!(latest["remaining_micro"], 0, "{latest}");
        assert_eq!(latest["charged_micro"], charged, "{latest}");
    }
}

/// A replica killed with `kill -9` while its request waits on a stalled upstream leaves a
/// precharge with a lease; a surviving replica refunds it once the lease expired — exactly
/// once, though two survivors sweep — and the survivors keep serving meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_request_is_refunded_once_by_a_survivor() {
    let pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = config(&pg, &mock, 10 * COST, false);
    let mut doomed = replica(dir.path(), "doomed", &body);
    let survivors = [
        replica(dir.path(), "s1", &body),
        replica(dir.path(), "s2", &body),
    ];
    mock.set_default(support::Behavior::HangBeforeHeaders(Duration::from_secs(
        60,
    )));
    let http = http();
    let stuck = {
        let (http, base) = (http.clone(), doomed.base.clone());
        tokio::spawn(async move {
            http.post(format!("{base}/v1/chat/completions"))
                .bearer_auth(ALICE)
                .json(&serde_json::json!({"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM quota_lease"
        ) == 1)
        .await
    );
    // The doomed replica renews its lease while the request lives.
    let until = |pg: &Postgres| pg.psql("SELECT lease_until FROM quota_lease");
    let first = until(&pg);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_ne!(until(&pg), first, "the lease is renewed");
    let session = pg.psql("SELECT request_id FROM quota_lease");
    doomed.kill9();
    assert!(
        stuck.await.unwrap().is_err(),
        "the client saw the connection die"
    );
    mock.set_default(support::Behavior::Ok);
    let (status, _) = ask(&http, &survivors[0], ALICE, false).await;
    assert_eq!(status, 200, "survivors serve meanwhile");
    let refunded = || {
        int(
            &pg,
            &format!(
                "SELECT count(*) FROM ledger WHERE request_id = '{session}' AND kind = 'refund'"
            ),
        )
    };
    assert!(
        eventually(Duration::from_secs(15), || refunded() == 1).await,
        "a survivor refunds the dead session"
    );
    tokio::time::sleep(Duration::from_secs(3)).await; // more sweeps by both survivors
    assert_eq!(refunded(), 1, "exactly once");
    assert_eq!(
        int(&pg, &format!("SELECT count(*) FROM ledger WHERE request_id = '{session}' AND kind <> 'precharge'")),
        1
    );
    assert_eq!(int(&pg, "SELECT count(*) FROM quota_lease"), 0);
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM ledger WHERE kind = 'settle'"
        ) == 1)
        .await
    );
    let (charged, remaining) = books(&pg, 10 * COST);
    assert_eq!(
        charged,
        COST * 1_000_000,
        "only the one served request is charged"
    );
    assert_eq!(remaining, 9 * COST * 1_000_000);
    let logs: String = survivors.iter().map(|r| r.log_text()).collect();
    assert_eq!(logs.matches("replica's lease expired").count(), 1, "{logs}");
}

/// B-cancel-guards (cancellation harness, PostgreSQL): a client that leaves while its debit
/// waits behind a `SELECT ... FOR UPDATE` on its balance row gets that precharge back — the
/// lease the statement commits after the client left is not renewed, it expires and is
/// swept — and the books are exactly the one served request. Before the fix the session
/// stayed in the renewal set for the life of the replica: the lease was renewed for good and
/// the precharge never came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_during_its_debit_gets_the_precharge_back() {
    let pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let replica = replica(dir.path(), "r", &config(&pg, &mock, 100 * COST, false));
    let http = http();
    // One served request: the balance row exists and costs exactly COST.
    assert_eq!(ask(&http, &replica, ALICE, false).await.0, 200);
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM quota_lease"
        ) == 0)
        .await
    );
    let (lock, driver) = lock_alice(&pg).await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let left = quick
        .post(format!("{}/v1/chat/completions", replica.base))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await;
    assert!(left.is_err(), "the client gave up while its debit waited");
    // The debit commits once the lock goes: its lease row appears, owned by nobody alive.
    lock.batch_execute("COMMIT").await.expect("unlocked");
    drop(lock);
    driver.abort();
    // Lease 2 s (renewed every 0.67 s if it were owned), swept every 1 s. No lease row alone
    // is not enough: right after the COMMIT the debit's own row may not be written yet.
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM ledger WHERE kind = 'refund'"
        ) >= 1
            && int(&pg, "SELECT count(*) FROM quota_lease") == 0)
        .await,
        "the abandoned lease is swept, not renewed, and refunded: {}",
        pg.psql("SELECT request_id, lease_until FROM quota_lease")
    );
    let (charged, _) = books(&pg, 100 * COST);
    assert_eq!(charged, COST * 1_000_000, "only the served request is paid");
    assert_eq!(
        int(&pg, "SELECT count(*) FROM ledger WHERE kind = 'refund'"),
        1,
        "the abandoned precharge is refunded once"
    );
}

/// B-pg-pool: `storage.pool_timeout` bounds a quota debit. With the client's balance
/// row locked, a request gets its 503 after the configured 300 ms, not the fixed 2 s of
/// before (PostgreSQL itself is healthy: only that statement waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_timeout_bounds_a_debit_behind_a_locked_row() {
    let pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = config(&pg, &mock, 100 * COST, false).replace(
        "queue_capacity: 8",
        "queue_capacity: 8\n  pool_size: 2\n  pool_timeout: 300ms",
    );
    let replica = replica(dir.path(), "r", &body);
    let http = http();
    assert_eq!(ask(&http, &replica, ALICE, false).await.0, 200);
    let (lock, driver) = lock_alice(&pg).await;
    let started = std::time::Instant::now();
    let (status, _) = ask(&http, &replica, ALICE, false).await;
    let took = started.elapsed();
    lock.batch_execute("ROLLBACK").await.expect("unlocked");
    driver.abort();
    assert_eq!(status, 503);
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(1500),
        "bounded by storage.pool_timeout: {took:?}"
    );
    // A healthy database: the next request is served.
    assert_eq!(ask(&http, &replica, ALICE, false).await.0, 200);
}

/// A transaction holding alice's balance row `FOR UPDATE` (end it with `COMMIT` or
/// `ROLLBACK`), and its connection's task.
async fn lock_alice(pg: &Postgres) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (lock, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("lock connection");
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    lock.batch_execute(
        "BEGIN; SELECT charged FROM quota_balance WHERE client = 'alice' FOR UPDATE",
    )
    .await
    .expect("row locked");
    (lock, driver)
}
