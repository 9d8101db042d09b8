//! Shared harness for integration tests: a real gateway on 127.0.0.1:0 (in-process, real
//! sockets) in front of scriptable mock upstreams.
#![allow(dead_code, unused_imports)]

pub mod external;
pub mod streams;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use switchyard::app::{start_on, Running};
pub use switchyard_mock::{Behavior, MockUpstream};

pub const ADMIN_TOKEN: &str = "test-admin-token";
pub const ALICE: &str = "sk-test-alice";

pub struct Gw {
    pub running: Option<Running>,
    pub base: String,
    pub admin: String,
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub http: reqwest::Client,
}

/// Start one mock per name; each answers with an `x-mock-name` header.
pub async fn mocks(names: &[&str]) -> HashMap<String, MockUpstream> {
    let mut mocks = HashMap::new();
    for n in names {
        let up = MockUpstream::start().await.expect("mock starts");
        up.set_name(n);
        mocks.insert(n.to_string(), up);
    }
    mocks
}

/// The fixed head of every test config: ephemeral ports, temp storage, admin token.
pub fn head(dir: &std::path::Path) -> String {
    format!(
        "listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\n  token: {ADMIN_TOKEN}\nstorage:\n  path: {}\ndebug_headers: true\n",
        dir.join("switchyard.db").display()
    )
}

/// Replace `{NAME}` with the base URL of mock NAME.
pub fn fill(yaml: &str, mocks: &HashMap<String, MockUpstream>) -> String {
    let mut out = yaml.to_string();
    for (n, m) in mocks {
        out = out.replace(&format!("{{{n}}}"), &m.base_url());
    }
    out
}

/// Start a gateway with `head()` + `body` (already filled).
pub async fn start_gw(body: &str) -> Gw {
    let dir = tempfile::tempdir().expect("tempdir");
    start_in(dir, body).await
}

pub async fn start_in(dir: tempfile::TempDir, body: &str) -> Gw {
    try_start_in(dir, body).await.expect("gateway starts")
}

/// `start_gw`, with the gateway's refusal of the config as an `Err` instead of a panic.
pub async fn try_start_gw(body: &str) -> Result<Gw, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    try_start_in(dir, body).await
}

pub async fn try_start_in(dir: tempfile::TempDir, body: &str) -> Result<Gw, String> {
    // Two serving threads, as `serve` runs on a two-core machine: every in-process test
    // crosses them (a request served on a thread of its own, its caps shared).
    try_start_on(dir, body, 2).await
}

/// `start_gw` with one serving thread: for a test that needs two connections served by the
/// same thread (they share its upstream pool).
pub async fn start_gw_on_one_thread(body: &str) -> Gw {
    let dir = tempfile::tempdir().expect("tempdir");
    try_start_on(dir, body, 1).await.expect("gateway starts")
}

async fn try_start_on(dir: tempfile::TempDir, body: &str, threads: usize) -> Result<Gw, String> {
    let config_path = dir.path().join("switchyard.yaml");
    std::fs::write(&config_path, format!("{}{}", head(dir.path()), body)).expect("write config");
    let running = start_on(&config_path, threads)
        .await
        .map_err(|e| format!("gateway refused the config: {e:#}"))?;
    let base = format!("http://{}", running.bound.listen);
    let admin = format!("http://{}", running.bound.admin);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    Ok(Gw {
        running: Some(running),
        base,
        admin,
        dir,
        config_path,
        http,
    })
}

impl Gw {
    pub async fn post(&self, path: &str, key: &str, body: serde_json::Value) -> reqwest::Response {
        self.http
            .post(format!("{}{}", self.base, path))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn chat(&self, model: &str, stream: bool) -> reqwest::Response {
        self.post(
            "/v1/chat/completions",
            ALICE,
            serde_json::json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await
    }

    pub async fn admin_get(&self, path: &str) -> (u16, serde_json::Value) {
        let response = self
            .http
            .get(format!("{}{}", self.admin, path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("admin request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
        )
    }

    pub async fn admin_post(&self, path: &str) -> u16 {
        self.http
            .post(format!("{}{}", self.admin, path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("admin request")
            .status()
            .as_u16()
    }

    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.admin))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .unwrap_or_default()
    }

    /// Rewrite the config file (same head) to trigger a reload.
    pub fn rewrite(&self, body: &str) {
        let tmp = self.dir.path().join("switchyard.yaml.tmp");
        std::fs::write(&tmp, format!("{}{}", head(self.dir.path()), body)).expect("write");
        std::fs::rename(&tmp, &self.config_path).expect("rename");
    }

    /// Wait until the live generation reaches `gen` (reload applied), up to 10 s.
    pub async fn wait_generation(&self, gen: u64) -> bool {
        for _ in 0..200 {
            if self
                .running
                .as_ref()
                .is_some_and(|r| r.gateway.generation() >= gen)
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    pub async fn flush(&self) {
        if let Some(r) = &self.running {
            let _ = r.gateway.store.flush().await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// The `x-switchyard-route` header of a response.
pub fn route(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("x-switchyard-route")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Minimal channel block.
pub fn channel(name: &str, url: &str, priority: i64, models: &[&str]) -> String {
    format!(
        "  {name}:\n    kind: openai\n    base_url: {url}\n    keys: [\"sk-up-{name}\"]\n    models: [{}]\n    priority: {priority}\n",
        models.join(", ")
    )
}

pub const CLIENTS: &str = "clients:\n  alice:\n    key: sk-test-alice\n";

/// Hold the database write lock and fill the store queue: the writer is stuck until the
/// returned connection rolls back (well within the store's 5 s busy timeout).
pub async fn jam(gw: &Gw) -> rusqlite::Connection {
    let store = &gw.running.as_ref().expect("running").gateway.store;
    let lock = rusqlite::Connection::open(gw.dir.path().join("switchyard.db")).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let filler = || switchyard::store::RequestRecord {
        id: "filler".into(),
        ..Default::default()
    };
    assert!(store.try_send(filler()));
    while store.queue_len() > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut filled = 0;
    while store.try_send(filler()) {
        filled += 1;
        assert!(filled <= 100_000, "queue never filled");
    }
    lock
}
