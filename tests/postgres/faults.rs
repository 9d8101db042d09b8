//! PostgreSQL unreachable (R17.2): writes are held (request log bounded, drops counted),
//! calls fail fast as "unavailable", and everything held is applied once it answers.
//! Migrations from stores opening together run once.

use std::time::{Duration, Instant};

use switchyard::store::LedgerKind::Settle;
use switchyard::store::{PgOptions, Store};

use super::support::external::Postgres;
use super::{entry, int, open, request};

#[tokio::test]
async fn writes_are_held_while_the_server_is_down_and_applied_after() {
    let mut pg = Postgres::start();
    let opts = PgOptions {
        queue_capacity: 16,
        ..PgOptions::default()
    };
    let store = Store::open_postgres(&pg.url(), opts).await.unwrap();
    let quota = store.quota().unwrap();
    assert!(
        quota
            .debit("s1", "alice", 100, 1000, 1)
            .await
            .unwrap()
            .admitted
    );
    pg.stop();
    store
        .send_durable_async(entry("s1", "alice", Settle, -40))
        .await
        .unwrap();
    store
        .send_durable_async(entry("u1", "bob", Settle, 7))
        .await
        .unwrap();
    store.flush().await.unwrap();
    assert!(!store.is_up(), "the failed batch marks the store down");
    let started = Instant::now();
    let err = quota.debit("s2", "alice", 1, 1000, 1).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "bounded: {:?}",
        started.elapsed()
    );
    for i in 0..200 {
        store.try_send(request(&format!("r{i}"), i));
        if i % 8 == 0 {
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    store.flush().await.unwrap();
    let dropped = store.dropped();
    assert!(
        dropped >= 200 - 32,
        "request log bounded while down: {dropped} dropped"
    );
    assert_eq!(
        quota.owned(),
        1,
        "s1 is still renewed: its settle is not written yet"
    );
    pg.start_server();
    let started = Instant::now();
    while (!store.is_up() || quota.held() > 0) && started.elapsed() < Duration::from_secs(15) {
        store.try_send(request("probe", 1));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    store.flush().await.unwrap();
    assert!(store.is_up());
    let balances = quota.balances().await.unwrap();
    assert_eq!(
        balances["alice"].charged, 60,
        "the held settle applied once"
    );
    assert_eq!(balances["bob"].charged, 7);
    assert_eq!(quota.owned(), 0);
    let logged = int(&pg, "SELECT count(*) FROM request_log WHERE id <> 'probe'");
    assert_eq!(
        logged as u64 + dropped,
        200,
        "every entry written or counted"
    );
}

/// Replicas starting at the same moment: each schema version is applied once.
#[tokio::test]
async fn migrations_run_once_when_stores_open_together() {
    let pg = Postgres::start();
    let url = pg.url();
    let opens = (0..4).map(|_| Store::open_postgres(&url, PgOptions::default()));
    let stores = futures_util::future::join_all(opens).await;
    assert!(stores.iter().all(Result::is_ok));
    assert_eq!(
        int(&pg, "SELECT count(*) FROM schema_version"),
        int(&pg, "SELECT max(version) FROM schema_version")
    );
    let again = open(&pg, Duration::from_secs(30)).await;
    assert_eq!(again.request_count().await.unwrap(), 0);
    // Every version applied exactly once, the newest included (v2 adds the trace id).
    assert_eq!(
        int(&pg, "SELECT count(*) FROM schema_version"),
        int(&pg, "SELECT max(version) FROM schema_version")
    );
    assert!(int(&pg, "SELECT max(version) FROM schema_version") >= 2);
    assert_eq!(
        int(
            &pg,
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'request_log' AND column_name = 'trace_id'"
        ),
        1
    );
}

/// A URL that cannot be reached fails at open with the reason, not a hang.
#[tokio::test]
async fn an_unreachable_url_fails_at_open() {
    let port = super::support::external::free_port();
    let url = format!("postgres://switchyard@127.0.0.1:{port}/switchyard");
    let err = Store::open_postgres(&url, PgOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unreachable"), "{err}");
}

/// A hot balance row (a lock held elsewhere) makes debits time out and the pool run dry:
/// those calls fail, but the store is not "down" (other clients keep their debits), and a
/// debit that timed out on our side but committed later is not renewed, so it gets swept.
#[tokio::test]
async fn a_slow_row_is_not_an_outage() {
    let pg = Postgres::start();
    let opts = PgOptions {
        pool_size: 2,
        timeout: Duration::from_millis(500),
        lease_ttl: Duration::from_secs(1),
        ..PgOptions::default()
    };
    let store = Store::open_postgres(&pg.url(), opts).await.unwrap();
    let quota = store.quota().unwrap();
    assert!(
        quota
            .debit("s0", "alice", 1, 1000, 1)
            .await
            .unwrap()
            .admitted
    );
    let (mut locker, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let tx = locker.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM quota_balance WHERE client = 'alice' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let (a, b) = tokio::join!(
        quota.debit("s1", "alice", 1, 1000, 1),
        quota.debit("s2", "alice", 1, 1000, 1)
    );
    assert!(
        a.is_err() && b.is_err(),
        "both wait on the lock past the timeout"
    );
    let error = quota.debit("s3", "alice", 1, 1000, 1).await.unwrap_err();
    assert!(!error.is_unavailable(), "busy, not down: {error}");
    assert!(store.is_up(), "a slow row is not an outage");
    tx.rollback().await.unwrap();
    assert!(
        super::eventually_ok(|| quota.debit("s4", "bob", 1, 1000, 1)).await,
        "debits work again once the pool frees"
    );
    assert_eq!(
        quota.owned(),
        2,
        "s0 and s4; the timed-out ones are not renewed"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let swept = quota.sweep(1).await.unwrap().refunds.len();
    assert!(
        swept >= 2,
        "s1 and s2 committed after their callers gave up: {swept}"
    );
}
