//! Task follow-ups across replicas (R10.5, R17, B-task-negative-cache): a poll that reaches a
//! second replica before the submission's binding is written does not make that replica
//! answer "unknown task" for the life of the job.

use std::time::Duration;

use super::support::external::Postgres;
use super::support::{MockUpstream, ADMIN_TOKEN, ALICE};
use super::*;

fn video_config(pg: &Postgres, mock: &MockUpstream) -> String {
    let m = mock.base_url();
    [
        format!("admin:\n  token: {ADMIN_TOKEN}"),
        format!("storage:\n  url: {}", pg.url()),
        "tasks:\n  paths: [/v1/videos]".into(),
        "channels:".into(),
        format!("  v:\n    kind: openai\n    base_url: {m}\n    keys: [\"sk-up-v\"]\n    models: [sora]\n    paths: [/v1/videos]"),
        format!("clients:\n  alice:\n    key: {ALICE}\n"),
    ]
    .join("\n")
}

async fn poll(http: &reqwest::Client, r: &Replica, id: &str) -> u16 {
    http.get(format!("{}/v1/videos/{id}", r.base))
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
    let r = http
        .post(format!("{}/v1/videos", a.base))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "sora", "prompt": "x"}))
        .send()
        .await
        .expect("submitted");
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["id"], "task_1");
    assert!(
        eventually(Duration::from_secs(10), || int(
            &pg,
            "SELECT count(*) FROM task_binding"
        ) == 1)
        .await,
        "the binding reached PostgreSQL"
    );
    let t = std::time::Instant::now();
    let mut code = poll(&http, &b, "task_1").await;
    while code != 200 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        code = poll(&http, &b, "task_1").await;
    }
    assert_eq!(code, 200, "replica B serves the follow-up");
    assert_eq!(poll(&http, &a, "task_1").await, 200);
}
