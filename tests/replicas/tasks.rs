//! Task follow-ups across replicas (R10.5, R17, B-task-negative-cache,
//! B-shared-task-bindings): a poll that reaches a second replica before the submission's
//! binding is written does not make that replica answer "unknown task" for the life of the
//! job, and with `shared.redis` the binding reaches the other replica at once — before the
//! store has it.

use std::time::Duration;

use super::support::external::{Postgres, Redis};
use super::support::{Behavior, MockUpstream, ADMIN_TOKEN, ALICE};
use super::*;

fn video_config(pg: &Postgres, mock: &MockUpstream) -> String {
    let base_url = mock.base_url();
    [
        format!("admin:\n  token: {ADMIN_TOKEN}"),
        format!("storage:\n  url: {}", pg.url()),
        "tasks:\n  paths: [/v1/videos]".into(),
        "channels:".into(),
        format!("  v:\n    kind: openai\n    base_url: {base_url}\n    keys: [\"sk-up-v\"]\n    models: [sora]\n    paths: [/v1/videos]"),
        format!("clients:\n  alice:\n    key: {ALICE}\n"),
    ]
    .join("\n")
}

async fn poll(http: &reqwest::Client, replica: &Replica, id: &str) -> u16 {
    http.get(format!("{}/v1/videos/{id}", replica.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("sent")
        .status()
        .as_u16()
}

/// Replica B is polled for `task_1` before replica A has accepted it (404, and B reads the
/// store), then A accepts it: B serves the follow-up once the binding is in PostgreSQL.
/// Before the fix B cached the negative answer for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_that_raced_the_submission_sees_the_binding_later() {
    let pg = Postgres::start();
    let mock = MockUpstream::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = video_config(&pg, &mock);
    let (a, b) = (
        replica(dir.path(), "a", &body),
        replica(dir.path(), "b", &body),
    );
    let http = http();
    assert_eq!(poll(&http, &b, "task_1").await, 404, "not submitted yet");
    let response = http
        .post(format!("{}/v1/videos", a.base))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "sora", "prompt": "x"}))
        .send()
        .await
        .expect("submitted");
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["id"], "task_1");
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM task_binding"
        ) == 1)
        .await,
        "the binding reached PostgreSQL"
    );
    let started = std::time::Instant::now();
    let mut code = poll(&http, &b, "task_1").await;
    while code != 200 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        code = poll(&http, &b, "task_1").await;
    }
    assert_eq!(code, 200, "replica B serves the follow-up");
    assert_eq!(poll(&http, &a, "task_1").await, 200);
}

/// Two channels for `sora` under `/v1/videos` (`hi` ranks first), tasks on, state shared
/// through `redis`, no same-target retries.
fn shared_video_config(
    pg: &Postgres,
    redis: &Redis,
    hi: &MockUpstream,
    lo: &MockUpstream,
) -> String {
    let ch = |name: &str, m: &MockUpstream, priority: i64| {
        format!("  {name}:\n    kind: openai\n    base_url: {}\n    keys: [\"sk-up-{name}\"]\n    models: [sora]\n    paths: [/v1/videos]\n    priority: {priority}", m.base_url())
    };
    [
        format!("admin:\n  token: {ADMIN_TOKEN}"),
        format!("storage:\n  url: {}", pg.url()),
        format!("shared:\n  redis: {}\n  replicas: 2", redis.url()),
        "debug_headers: true".into(),
        "resilience:\n  retry: {max_retries: 0}".into(),
        "tasks:\n  paths: [/v1/videos]".into(),
        "channels:".into(),
        ch("hi", hi, 10),
        ch("lo", lo, 0),
        format!("clients:\n  alice:\n    key: {ALICE}\n"),
    ]
    .join("\n")
}

/// (status, the mock that answered) of a follow-up on `r`.
async fn follow_up(http: &reqwest::Client, replica: &Replica, id: &str) -> (u16, String) {
    let resp = http
        .get(format!("{}/v1/videos/{id}", replica.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("sent");
    let name = resp
        .headers()
        .get("x-mock-name")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (resp.status().as_u16(), name)
}

/// A transaction holding `task_binding` in `EXCLUSIVE` mode: reads go on, the writer's
/// insert of a binding waits (end it with `ROLLBACK`).
async fn hold_task_bindings(
    pg: &Postgres,
) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (lock, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("lock connection");
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    lock.batch_execute("BEGIN; LOCK TABLE task_binding IN EXCLUSIVE MODE")
        .await
        .expect("table locked");
    (lock, driver)
}

/// B-shared-task-bindings: replica A accepts a task on `lo` (after `hi` refused it) while
/// the store cannot take the binding yet; a follow-up on replica B right away is served by
/// `lo` — the binding came through Redis, not from the store, and `hi`, which ranks first,
/// is never asked. Before the fix B answered `404 task_not_found` until the store had it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_accepted_on_one_replica_is_followed_up_on_another_at_once() {
    let pg = Postgres::start();
    let redis = Redis::start();
    let (hi, lo) = (
        MockUpstream::start().await.unwrap(),
        MockUpstream::start().await.unwrap(),
    );
    hi.set_name("hi");
    lo.set_name("lo");
    let dir = tempfile::tempdir().unwrap();
    let body = shared_video_config(&pg, &redis, &hi, &lo);
    let (a, b) = (
        replica(dir.path(), "a", &body),
        replica(dir.path(), "b", &body),
    );
    let http = http();
    for r in [&a, &b] {
        assert!(wait_shared_up(&http, r).await, "replica joined Redis");
    }
    // The subscriptions are taken once Redis answers; give them a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (lock, driver) = hold_task_bindings(&pg).await;
    hi.set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let response = http
        .post(format!("{}/v1/videos", a.base))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "sora", "prompt": "x"}))
        .send()
        .await
        .expect("submitted");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-mock-name"],
        "lo",
        "hi refused, lo accepted"
    );
    let body: serde_json::Value = response.json().await.unwrap();
    let id = body["id"].as_str().expect("task id").to_string();
    let hi_calls = hi.calls();

    let started = std::time::Instant::now();
    let mut got = follow_up(&http, &b, &id).await;
    while got.0 != 200 && started.elapsed() < Duration::from_millis(1000) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        got = follow_up(&http, &b, &id).await;
    }
    assert_eq!(
        got,
        (200, "lo".to_string()),
        "replica B serves the follow-up on the accepting channel at once (after {:?}); logs:\n{}\n----\n{}",
        started.elapsed(),
        a.log_text(),
        b.log_text()
    );
    eprintln!(
        "replica B served the follow-up after {:?}",
        started.elapsed()
    );
    assert_eq!(
        int(&pg, "SELECT count(*) FROM task_binding"),
        0,
        "the store did not have the binding yet"
    );
    assert_eq!(
        hi.calls(),
        hi_calls,
        "hi, which ranks first, was never asked"
    );

    lock.batch_execute("ROLLBACK").await.expect("unlocked");
    drop(lock);
    driver.abort();
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM task_binding"
        ) == 1)
        .await,
        "the binding reached the store once it could"
    );
    assert_eq!(follow_up(&http, &a, &id).await, (200, "lo".to_string()));
}

/// `switchyard_shared_state_up` is 1 on `r` within 5 s.
async fn wait_shared_up(http: &reqwest::Client, replica: &Replica) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let text = metrics(http, replica).await;
        if sample(&text, "switchyard_shared_state_up", "") == 1.0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
