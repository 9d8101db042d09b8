//! Three real switchyard processes on one private Redis, with mock upstreams `bad`, `good`
//! (model `m`, priorities 10 and 0) and `s1`, `s2` (model `s`, one tier): the harness of
//! the end-to-end replica tests.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::external::{free_port, Redis, Replica};
use crate::support::{ADMIN_TOKEN, ALICE};
use switchyard_mock::MockUpstream;

/// The key of client `limited` (`limits: {rpm: 10}`, R15.1).
pub const LIMITED: &str = "sk-test-limited";

pub struct Fleet {
    pub replicas: Vec<Replica>,
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A free port not handed out before in this process (two quick `free_port` calls may
/// return the same one).
fn unique_port() -> u16 {
    static TAKEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut taken = TAKEN.lock().unwrap();
    loop {
        let port = free_port();
        if !taken.contains(&port) {
            taken.push(port);
            return port;
        }
    }
}

/// The breaker of [`Fleet::start`]'s replicas.
pub const BREAKER: &str = "{failure_threshold: 2, success_threshold: 1, timeout: 2s}";

fn config(
    dir: &std::path::Path,
    i: usize,
    redis: &str,
    mocks: &HashMap<&str, MockUpstream>,
    breaker: &str,
    probe: &str,
) -> (std::path::PathBuf, u16, u16) {
    let (listen, admin) = (unique_port(), unique_port());
    let ch = |name: &str, priority: i64, model: &str| {
        format!(
            "  {name}:\n    kind: openai\n    base_url: {}\n    keys: [\"sk-up-{name}\"]\n    models: [{model}]\n    priority: {priority}\n",
            mocks[name].base_url()
        )
    };
    let yaml = format!(
        "listen: 127.0.0.1:{listen}\nadmin:\n  listen: 127.0.0.1:{admin}\n  token: {ADMIN_TOKEN}\n\
         storage:\n  path: {}\ndebug_headers: true\n\
         shared:\n  redis: {redis}\n  replicas: 3\n\
         routing:\n  retry_times: 3\n  retry_budget: {{ratio: 1.0, min_per_second: 100, ttl: 10s}}\n\
         resilience:\n  retry: {{max_retries: 0}}\n  circuit_breaker: {breaker}\n  active_probe: {probe}\n\
         auto_disable:\n  probe_interval: 1h\n\
         channels:\n{}{}{}{}\
         clients:\n  alice:\n    key: {ALICE}\n  limited:\n    key: {LIMITED}\n    limits: {{rpm: 10}}\n",
        dir.join(format!("r{i}.db")).display(),
        ch("bad", 10, "m"),
        ch("good", 0, "m"),
        ch("s1", 0, "s"),
        ch("s2", 0, "s"),
    );
    let path = dir.join(format!("r{i}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    (path, listen, admin)
}

impl Fleet {
    pub fn start(redis: &Redis, mocks: &HashMap<&str, MockUpstream>) -> Fleet {
        Fleet::start_with(redis, mocks, 3, BREAKER)
    }

    /// `n` replicas whose `resilience.circuit_breaker` is `breaker` (YAML flow mapping).
    pub fn start_with(
        redis: &Redis,
        mocks: &HashMap<&str, MockUpstream>,
        n: usize,
        breaker: &str,
    ) -> Fleet {
        Fleet::start_probing(redis, mocks, n, breaker, "{enabled: false}")
    }

    /// [`Fleet::start_with`] with `resilience.active_probe` set to `probe` (a flow mapping).
    pub fn start_probing(
        redis: &Redis,
        mocks: &HashMap<&str, MockUpstream>,
        n: usize,
        breaker: &str,
        probe: &str,
    ) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let replicas = (0..n)
            .map(|i| {
                let (path, l, a) = config(dir.path(), i, &redis.url(), mocks, breaker, probe);
                Replica::spawn(&path, l, a)
            })
            .collect();
        Fleet {
            replicas,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            _dir: dir,
        }
    }

    /// A chat request to replica `i`; returns (status, the route header).
    pub async fn chat(
        &self,
        i: usize,
        model: &'static str,
        conversation: Option<&str>,
    ) -> (u16, String) {
        let conversation = conversation.map(str::to_string);
        chat_to(
            self.http.clone(),
            self.replicas[i].base.clone(),
            model,
            conversation,
        )
        .await
    }

    pub async fn channel(&self, i: usize, name: &str) -> serde_json::Value {
        let body: serde_json::Value = self
            .http
            .get(format!("{}/admin/channels", self.replicas[i].admin))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["channels"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == name).cloned())
            .unwrap_or_default()
    }

    pub fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(|r| r.log_text())
            .collect::<Vec<_>>()
            .join("\n----\n")
    }

    pub async fn admin_post(&self, i: usize, path: &str) -> u16 {
        self.http
            .post(format!("{}{path}", self.replicas[i].admin))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    pub async fn metric(&self, i: usize, name: &str) -> Option<f64> {
        let text = self
            .http
            .get(format!("{}/metrics", self.replicas[i].admin))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// Wait until `check(replica)` holds on replica `i`; returns how long it took.
    pub async fn until<F, Fut>(&self, i: usize, limit: Duration, check: F) -> Option<Duration>
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while started.elapsed() < limit {
            if check(i).await {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }
}

pub async fn chat_to(
    http: reqwest::Client,
    base: String,
    model: &'static str,
    conversation: Option<String>,
) -> (u16, String) {
    let mut req = http
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(ALICE)
        .json(
            &serde_json::json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}),
        );
    if let Some(c) = conversation {
        req = req.header("x-conversation-id", c);
    }
    let response = req.send().await.expect("request");
    let route = crate::support::route(&response);
    (response.status().as_u16(), route)
}

pub async fn mocks() -> HashMap<&'static str, MockUpstream> {
    let mut mocks = HashMap::new();
    for n in ["bad", "good", "s1", "s2"] {
        let up = MockUpstream::start().await.unwrap();
        up.set_name(n);
        mocks.insert(n, up);
    }
    mocks
}
