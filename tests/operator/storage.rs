//! Storage that does not fill the disk (R12.1, R11.2, B-retention): the request log is
//! kept within `storage.request_log`, old ledger sessions are folded into their client's
//! totals without losing a balance across a restart, and a full disk is a log line and a
//! metric: unlimited clients are served, the request log is dropped and counted, and
//! clients with a quota get a clear 503 in their own wire format until space is back.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::support::*;
use serde_json::json;

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// `head()` with `storage.request_log` set.
fn config(dir: &Path, request_log: &str, body: &str) -> String {
    let db = format!("  path: {}\n", dir.join("switchyard.db").display());
    let head = head(dir).replace(&db, &format!("{db}  request_log: {request_log}\n"));
    format!("{head}{body}")
}

async fn start_with(request_log: &str, body: &str) -> Gw {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("switchyard.yaml");
    std::fs::write(&config_path, config(dir.path(), request_log, body)).unwrap();
    let running = switchyard::app::start(&config_path).await.expect("starts");
    Gw {
        base: format!("http://{}", running.bound.listen),
        admin: format!("http://{}", running.bound.admin),
        running: Some(running),
        dir,
        config_path,
        http: reqwest::Client::new(),
    }
}

async fn until(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    for _ in 0..300 {
        if condition().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn the_request_log_is_kept_within_max_rows() {
    let mocks = mocks(&["up"]).await;
    let body = fill(
        &format!("channels:\n{}{CLIENTS}", channel("up", "{up}", 0, &["m"])),
        &mocks,
    );
    let gw = start_with("{max_rows: 5, max_age: 0}", &body).await;
    for _ in 0..12 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    until("the request log to shrink to 5 rows", async || {
        let (_, v) = gw.admin_get("/admin/requests?limit=100").await;
        v["requests"].as_array().unwrap().len() == 5
    })
    .await;
    // The writer counts what it pruned after the delete commits: wait for the count too.
    until("the pruned rows to be counted", async || {
        let text = gw.metrics().await;
        value(
            &text,
            "switchyard_store_pruned_total{table=\"request_log\"}",
        ) >= 7.0
    })
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_compacted_ledger_keeps_every_balance_across_a_restart() {
    let mocks = mocks(&["up"]).await;
    let body = fill(
        &format!(
            "channels:\n{}clients:\n  alice: {{key: {ALICE}, quota: 1000000}}\npricing:\n  m: {{input: 1000, output: 1000}}\n",
            channel("up", "{up}", 0, &["m"])
        ),
        &mocks,
    );
    let mut gw = start_with("{max_age: 1s, max_rows: 0}", &body).await;
    for _ in 0..5 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    let (_, before) = gw.admin_get("/admin/clients/alice").await;
    assert!(before["charged_micro"].as_i64().unwrap() > 0, "{before}");
    until("the ledger to be compacted", async || {
        value(
            &gw.metrics().await,
            "switchyard_store_pruned_total{table=\"ledger\"}",
        ) >= 10.0
    })
    .await;
    let store = gw.running.as_ref().unwrap().gateway.store.clone();
    assert!(store.dangling_precharges().await.unwrap().is_empty());
    // Restart on the same database: the balance is rebuilt from the compacted totals.
    gw.running.take().unwrap().shutdown().await;
    drop(store);
    let running = switchyard::app::start(&gw.config_path).await.unwrap();
    gw.admin = format!("http://{}", running.bound.admin);
    gw.running = Some(running);
    let (_, after) = gw.admin_get("/admin/clients/alice").await;
    for k in ["charged_micro", "refunded_micro", "remaining_micro"] {
        assert_eq!(after[k], before[k], "{k}: {before} vs {after}");
    }
    gw.stop().await;
}

/// Every log line of this process, JSON, as written.
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        let sink_buf = buf.clone();
        let _ = tracing_subscriber::fmt()
            .json()
            .with_writer(move || Sink(sink_buf.clone()))
            .try_init();
        buf
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_full_disk_is_logged_counted_and_fails_closed_for_quota_clients_only() {
    let logs = logs();
    let mocks = mocks(&["up", "an"]).await;
    let body = fill(
        &format!(
            "channels:\n{}  an:\n    kind: anthropic\n    base_url: {{an}}\n    models: [c]\nclients:\n  alice: {{key: {ALICE}}}\n  bob: {{key: sk-bob, quota: 1000000}}\npricing:\n  m: {{input: 1, output: 1}}\n  c: {{input: 1, output: 1}}\n",
            channel("up", "{up}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_with("{max_age: 0, max_rows: 0}", &body).await;
    let store = gw.running.as_ref().unwrap().gateway.store.clone();
    let bob_chat = || {
        gw.post(
            "/v1/chat/completions",
            "sk-bob",
            json!({"model": "m", "messages": []}),
        )
    };
    assert_eq!(bob_chat().await.status(), 200);
    gw.flush().await;
    store.cap_pages(store.page_count().await.unwrap());
    let mut requests = 0;
    while !store.is_full() {
        assert!(requests < 2_000, "the capped database never filled");
        assert_eq!(gw.chat("m", false).await.status(), 200);
        requests += 1;
        if requests % 10 == 0 {
            gw.flush().await;
        }
    }
    // Unlimited clients are served; clients with a quota fail closed, in their format.
    for _ in 0..5 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    let response = bob_chat().await;
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "storage_full", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk full"),
        "{body}"
    );
    let response = gw
        .http
        .post(format!("{}/v1/messages", gw.base))
        .header("x-api-key", "sk-bob")
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "c", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        (body["type"].as_str(), body["error"]["code"].as_str()),
        (Some("error"), Some("storage_full")),
        "{body}"
    );
    // The writer counts the rows it had to drop as it meets them: wait for the five.
    until("the dropped request-log rows to be counted", async || {
        let text = gw.metrics().await;
        value(&text, "switchyard_store_dropped_total{op=\"request_log\"}") >= 5.0
    })
    .await;
    let text = gw.metrics().await;
    assert_eq!(value(&text, "switchyard_store_disk_full"), 1.0);
    let lines = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    let full: Vec<&str> = lines
        .lines()
        .filter(|l| l.contains("no space left for the database"))
        .collect();
    assert_eq!(full.len(), 1, "one clear line:\n{lines}");
    assert!(full[0].contains("\"level\":\"ERROR\""), "{}", full[0]);

    // Space again: writes resume, and clients with a quota are served.
    store.cap_pages(1 << 30);
    tokio::time::sleep(Duration::from_millis(3200)).await;
    assert_eq!(gw.chat("m", false).await.status(), 200);
    gw.flush().await;
    assert!(!store.is_full());
    assert_eq!(bob_chat().await.status(), 200);
    assert_eq!(
        value(&gw.metrics().await, "switchyard_store_disk_full"),
        0.0
    );
    gw.stop().await;
}
