//! The shared quota (R11.3, R17.2): one conditional debit across stores, settle/refund once,
//! leases renewed while alive and swept exactly once after a replica died.

use std::sync::Arc;
use std::time::Duration;

use switchyard::store::LedgerKind::{Refund, Settle};
use switchyard::store::Store;

use super::support::external::Postgres;
use super::{entry, int, open};

/// Three stores (three replicas' connections) race 60 debits of 7 against a quota of 70:
/// exactly 10 pass, and the books balance.
#[tokio::test]
async fn sixty_debits_from_three_stores_admit_exactly_ten() {
    let pg = Postgres::start();
    let mut stores = Vec::new();
    for _ in 0..3 {
        stores.push(open(&pg, Duration::from_secs(30)).await);
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(60));
    let mut tasks = Vec::new();
    for i in 0..60 {
        let quota = stores[i % 3].quota().unwrap();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            quota
                .debit(&format!("s{i}"), "alice", 7, 70, 1)
                .await
                .unwrap()
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        // A refusal reports the balance as of its statement's snapshot; only the count and
        // the books below are exact.
        if t.await.unwrap().admitted {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10);
    assert_eq!(
        int(
            &pg,
            "SELECT charged FROM quota_balance WHERE client = 'alice'"
        ),
        70
    );
    assert_eq!(int(&pg, "SELECT count(*) FROM quota_lease"), 10);
    assert_eq!(
        int(&pg, "SELECT count(*) FROM ledger WHERE kind = 'precharge'"),
        10
    );
    let owned: usize = stores.iter().map(|s| s.quota().unwrap().owned()).sum();
    assert_eq!(owned, 10, "each admitted session is renewed by its store");
}

/// A settle closes the session once: a replay, a refund after it and a replay from another
/// store change nothing; the lease is gone and the balance is the real cost.
#[tokio::test]
async fn settle_and_refund_close_a_session_once() {
    let pg = Postgres::start();
    let one = open(&pg, Duration::from_secs(30)).await;
    let two = open(&pg, Duration::from_secs(30)).await;
    let quota = one.quota().unwrap();
    assert!(
        quota
            .debit("s1", "alice", 100, 1000, 1)
            .await
            .unwrap()
            .admitted
    );
    assert!(
        quota
            .debit("s2", "alice", 100, 1000, 1)
            .await
            .unwrap()
            .admitted
    );
    assert_eq!(quota.owned(), 2);
    one.send_durable_async(entry("s1", "alice", Settle, -40))
        .await
        .unwrap();
    one.send_durable_async(entry("s1", "alice", Settle, -40))
        .await
        .unwrap();
    one.send_durable_async(entry("s1", "alice", Refund, 100))
        .await
        .unwrap();
    one.send_durable_async(entry("s2", "alice", Refund, 100))
        .await
        .unwrap();
    one.flush().await.unwrap();
    two.send_durable_async(entry("s2", "alice", Refund, 100))
        .await
        .unwrap();
    two.send_durable_async(entry("s1", "alice", Settle, 500))
        .await
        .unwrap();
    two.flush().await.unwrap();
    assert_eq!(quota.owned(), 0, "closed sessions are no longer renewed");
    let kinds = |s: &str| {
        pg.psql(&format!(
            "SELECT string_agg(kind || ':' || amount, ',' ORDER BY seq) FROM ledger WHERE request_id = '{s}'"
        ))
    };
    assert_eq!(kinds("s1"), "precharge:100,settle:-40");
    assert_eq!(kinds("s2"), "precharge:100,refund:100");
    assert_eq!(int(&pg, "SELECT count(*) FROM quota_lease"), 0);
    let balance = quota.balances().await.unwrap()["alice"];
    assert_eq!((balance.charged, balance.refunded), (60, 100));
    assert_eq!(one.ledger_totals().await.unwrap()["alice"], balance);
    // A settle of a session that never had a precharge (trusted, unlimited) is charged once.
    one.send_durable_async(entry("u1", "bob", Settle, 30))
        .await
        .unwrap();
    two.send_durable_async(entry("u1", "bob", Settle, 30))
        .await
        .unwrap();
    one.flush().await.unwrap();
    two.flush().await.unwrap();
    // A refund without a precharge returns nothing.
    one.send_durable_async(entry("u2", "bob", Refund, 999))
        .await
        .unwrap();
    one.flush().await.unwrap();
    assert_eq!(quota.balances().await.unwrap()["bob"].charged, 30);
}

/// A replica that died (its sessions are never renewed) leaves precharges that survivors
/// refund once the lease expired — exactly once though two sweep at the same moment; a
/// late settle from the dead replica's queue is then not applied.
#[tokio::test]
async fn expired_leases_are_refunded_once_by_racing_sweeps() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(1);
    let dead = open(&pg, ttl).await;
    let (b, c) = (open(&pg, ttl).await, open(&pg, ttl).await);
    let qd = dead.quota().unwrap();
    for i in 0..5 {
        assert!(
            qd.debit(&format!("d{i}"), "alice", 10, 1000, 1)
                .await
                .unwrap()
                .admitted
        );
    }
    let (qb, qc) = (b.quota().unwrap(), c.quota().unwrap());
    assert!(
        qb.debit("live", "alice", 10, 1000, 1)
            .await
            .unwrap()
            .admitted
    );
    assert!(
        qb.sweep(1).await.unwrap().refunds.is_empty(),
        "not expired yet"
    );
    let renew = async {
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            assert_eq!(qb.renew().await.unwrap(), 1, "b renews its one session");
        }
    };
    renew.await;
    let (x, y) = tokio::join!(qb.sweep(2), qc.sweep(2));
    let mut refunds = x.unwrap().refunds;
    refunds.extend(y.unwrap().refunds);
    assert_eq!(refunds.len(), 5, "each dead session once: {refunds:?}");
    assert!(refunds.iter().all(|(c, a)| c == "alice" && *a == 10));
    assert_eq!(
        int(&pg, "SELECT count(*) FROM ledger WHERE kind = 'refund'"),
        5
    );
    let lease = pg.psql("SELECT request_id FROM quota_lease");
    assert_eq!(lease, "live", "the renewed session is not swept");
    // The dead replica's queued settle arrives late: the session is already closed.
    dead.send_durable_async(entry("d0", "alice", Settle, 5))
        .await
        .unwrap();
    dead.flush().await.unwrap();
    let b_now = qb.balances().await.unwrap()["alice"];
    assert_eq!((b_now.charged, b_now.refunded), (10, 50));
}

/// Settles racing sweeps on the same expired sessions: every session ends with exactly one
/// terminal entry, and the balance is exactly what those entries say.
#[tokio::test]
async fn settles_racing_the_sweep_close_each_session_once() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(1);
    let owner = open(&pg, ttl).await;
    let sweeper: Store = open(&pg, ttl).await;
    let quota = owner.quota().unwrap();
    for i in 0..40 {
        assert!(
            quota
                .debit(&format!("s{i}"), "alice", 100, 1_000_000, 1)
                .await
                .unwrap()
                .admitted
        );
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let settles = async {
        for i in 0..40 {
            owner
                .send_durable_async(entry(&format!("s{i}"), "alice", Settle, 50))
                .await
                .unwrap();
        }
        owner.flush().await.unwrap();
    };
    let qs = sweeper.quota().unwrap();
    // A sweep round may fail while the writer holds the rows it wants (a lock wait past the
    // store timeout, a deadlock PostgreSQL broke): the sweeper retries next round, as the
    // store's own sweep task does, and nothing of a failed round was applied.
    let sweeps = async {
        let (mut n, mut rounds) = (0, 0);
        for _ in 0..400 {
            if rounds == 40 {
                break;
            }
            if let Ok(s) = qs.sweep(2).await {
                n += s.refunds.len() as i64;
                rounds += 1;
            }
        }
        assert_eq!(rounds, 40, "most sweep rounds succeed");
        n
    };
    let ((), refunded) = tokio::join!(settles, sweeps);
    assert_eq!(
        int(&pg, "SELECT count(*) FROM ledger WHERE kind <> 'precharge'"),
        40,
        "one terminal entry per session"
    );
    let settled = int(&pg, "SELECT count(*) FROM ledger WHERE kind = 'settle'");
    assert_eq!(settled + refunded, 40);
    let balance = quota.balances().await.unwrap()["alice"];
    assert_eq!(
        balance.charged,
        settled * 150,
        "settled: 100 + 50; refunded: 0"
    );
    assert_eq!(balance.refunded, refunded * 100);
    assert_eq!(owner.ledger_totals().await.unwrap()["alice"], balance);
}

/// Start-up (R11.2 with several replicas): a new replica refunds the precharges whose lease
/// expired — not those of a replica still alive — and loads the shared balances.
#[tokio::test]
async fn start_up_recovery_refunds_only_expired_leases() {
    let pg = Postgres::start();
    let ttl = Duration::from_secs(1);
    let dead = open(&pg, ttl).await;
    let alive = open(&pg, ttl).await;
    let qd = dead.quota().unwrap();
    assert!(qd.debit("d1", "alice", 40, 1000, 1).await.unwrap().admitted);
    assert!(
        alive
            .quota()
            .unwrap()
            .debit("a1", "alice", 2, 1000, 1)
            .await
            .unwrap()
            .admitted
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    alive.quota().unwrap().renew().await.unwrap();
    let fresh = open(&pg, ttl).await;
    let billing = switchyard::billing::Billing::new(fresh.clone());
    let recovered = billing.recover().await.unwrap();
    assert_eq!(
        (
            recovered.refunded,
            recovered.refunded_micro,
            recovered.clients
        ),
        (1, 40, 1)
    );
    assert_eq!(pg.psql("SELECT request_id FROM quota_lease"), "a1");
    let balance = fresh.quota().unwrap().balances().await.unwrap()["alice"];
    assert_eq!((balance.charged, balance.refunded), (2, 40));
}
