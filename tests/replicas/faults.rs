//! PostgreSQL stopped under several replicas (R17.2), and replicas starting together.

use std::time::Duration;

use super::support::external::{Postgres, Replica};
use super::support::{MockUpstream, ALICE};
use super::*;

/// PostgreSQL stops mid-run: unlimited clients are still served; a quota client gets a 503 in
/// its wire format (fail closed) or, on a `fail_open` replica, is served within the bound of
/// the balance it last saw; request-log entries beyond the buffer are dropped and counted;
/// `switchyard_store_up` says so. When PostgreSQL is back, the held settles are applied and
/// every balance converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_fails_closed_or_open_and_converges_after() {
    let mut pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let quota = 10 * COST;
    let closed = replica(dir.path(), "closed", &config(&pg, &mock, quota, false));
    let open = replica(dir.path(), "open", &config(&pg, &mock, quota, true));
    let http = http();
    for r in [&closed, &open] {
        assert_eq!(ask(&http, r, ALICE, false).await.0, 200);
    }
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM ledger WHERE kind = 'settle'"
        ) == 2)
        .await
    );
    // The fail_open replica's cache has seen both charges: 8 requests' worth left.
    let mut seen = account(&http, &open).await;
    for _ in 0..100 {
        if seen["charged_micro"] == 2 * COST * 1_000_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = account(&http, &open).await;
    }
    assert_eq!(seen["charged_micro"], 2 * COST * 1_000_000, "{seen}");
    pg.stop();

    for r in [&closed, &open] {
        for anthropic in [false, true] {
            let (s, _) = ask(&http, r, BOB, anthropic).await;
            assert_eq!(s, 200, "unlimited clients keep flowing");
        }
    }
    let (s, body) = ask(&http, &closed, ALICE, false).await;
    assert_eq!(s, 503, "{body}");
    assert_eq!(
        body["error"]["code"], "storage_unavailable",
        "OpenAI format: {body}"
    );
    let (s, body) = ask(&http, &closed, ALICE, true).await;
    assert_eq!(s, 503, "{body}");
    assert_eq!(body["type"], "error", "Anthropic format: {body}");
    assert_eq!(body["error"]["type"], "api_error", "{body}");

    // fail_open: served from the last known balance (8 requests' worth), then refused.
    let mut served = 0;
    for _ in 0..12 {
        match ask(&http, &open, ALICE, false).await.0 {
            200 => served += 1,
            s => assert!(s == 429 || s == 402, "{s}"),
        }
    }
    assert_eq!(served, 8, "bounded by the balance this replica last saw");

    for _ in 0..30 {
        let _ = ask(&http, &closed, BOB, false).await;
    }
    let metrics = metrics(&http, &closed).await;
    assert_eq!(
        sample(&metrics, "switchyard_store_up", ""),
        0.0,
        "{metrics}"
    );
    assert!(
        sample(&metrics, "switchyard_store_dropped_total", "request_log") > 0.0,
        "drops counted"
    );

    pg.start_server();
    let up = |r: &Replica| {
        let (http, admin) = (http.clone(), r.admin.clone());
        async move {
            for _ in 0..150 {
                let metrics = http
                    .get(format!("{admin}/metrics"))
                    .send()
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                if sample(&metrics, "switchyard_store_up", "") == 1.0 {
                    return Some(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            None
        }
    };
    assert!(
        up(&closed).await.is_some() && up(&open).await.is_some(),
        "store_up back to 1"
    );
    // 2 before + 8 offline settles, each applied once.
    assert!(
        eventually(Duration::from_secs(15), || int(
            &pg,
            "SELECT count(*) FROM ledger WHERE client = 'alice' AND kind = 'settle'"
        ) == 10)
        .await,
        "held settles applied"
    );
    let (charged, remaining) = books(&pg, quota);
    assert_eq!((charged, remaining), (quota * 1_000_000, 0));
    assert_eq!(
        ask(&http, &closed, ALICE, false).await.0 / 100,
        4,
        "quota spent: refused"
    );
    for r in [&closed, &open] {
        let mut latest = account(&http, r).await;
        for _ in 0..30 {
            if latest["charged_micro"] == charged {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            latest = account(&http, r).await;
        }
        assert_eq!(
            latest["charged_micro"], charged,
            "the cache converges: {latest}"
        );
    }
}

/// Two replicas starting at the same moment on an empty database: every schema version is
/// applied once, by one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_starting_together_migrate_once() {
    let pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = config(&pg, &mock, 10, false);
    let (a, b) = std::thread::scope(|s| {
        let replica_a = s.spawn(|| replica(dir.path(), "a", &body));
        let replica_b = s.spawn(|| replica(dir.path(), "b", &body));
        (replica_a.join().unwrap(), replica_b.join().unwrap())
    });
    let versions = int(&pg, "SELECT max(version) FROM schema_version");
    assert_eq!(int(&pg, "SELECT count(*) FROM schema_version"), versions);
    let logs = a.log_text() + &b.log_text();
    assert_eq!(
        logs.matches("store schema migrated").count() as i64,
        versions,
        "each version once across both: {logs}"
    );
    let http = http();
    assert_eq!(ask(&http, &a, ALICE, false).await.0, 200);
    assert_eq!(ask(&http, &b, ALICE, false).await.0, 200);
}
