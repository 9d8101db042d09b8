//! Several real switchyard processes on one private PostgreSQL (R17, R11): the quota is
//! shared exactly under concurrency, a `kill -9` mid-request leaves a precharge that a
//! survivor refunds once, PostgreSQL going away and coming back, task follow-ups on a second
//! replica (`tasks`), and replicas starting
//! together migrate once.
use crate::support;

#[path = "replicas/faults.rs"]
mod faults;
#[path = "replicas/quota.rs"]
mod quota;
#[path = "replicas/tasks.rs"]
mod tasks;

use std::path::Path;
use std::time::{Duration, Instant};

use support::external::{free_port, Postgres, Replica};
use support::{MockUpstream, ADMIN_TOKEN, ALICE};

pub const BOB: &str = "sk-test-bob";
/// Credits one mock answer costs: 3 completion tokens at 1 credit each, prompts free. The
/// requests ask for `max_tokens: 3`, so the precharge is the real cost.
pub const COST: i64 = 3;

/// One replica's config: `quota` credits for alice (bob is unlimited).
pub fn config(pg: &Postgres, mock: &MockUpstream, quota: i64, fail_open: bool) -> String {
    let base_url = mock.base_url();
    [
        format!("admin:\n  token: {ADMIN_TOKEN}"),
        format!("storage:\n  url: {}\n  lease_ttl: 2s\n  queue_capacity: 8", pg.url()),
        format!("shared:\n  fail_open: {fail_open}"),
        "channels:".into(),
        format!("  a:\n    kind: openai\n    base_url: {base_url}\n    keys: [\"sk-up-a\"]\n    models: [m]"),
        format!("  b:\n    kind: anthropic\n    base_url: {base_url}\n    keys: [\"sk-up-b\"]\n    models: [ma]"),
        format!("clients:\n  alice:\n    key: {ALICE}\n    quota: {quota}\n  bob:\n    key: {BOB}"),
        "pricing:\n  m: {input: 0, output: 1000000}\n  ma: {input: 0, output: 1000000}\n".into(),
    ]
    .join("\n")
}

/// Starts a replica from `body` (ports added) in `dir`.
pub fn replica(dir: &Path, name: &str, body: &str) -> Replica {
    let (listen, admin) = (free_port(), free_port());
    let path = dir.join(format!("{name}.yaml"));
    let text = format!(
        "listen: 127.0.0.1:{listen}\n{}",
        body.replacen(
            "admin:\n",
            &format!("admin:\n  listen: 127.0.0.1:{admin}\n"),
            1
        )
    );
    std::fs::write(&path, text).expect("config written");
    let started = std::panic::catch_unwind(|| Replica::spawn(&path, listen, admin));
    started.unwrap_or_else(|e| {
        let log = std::fs::read_to_string(path.with_extension(format!("{listen}.log")));
        panic!(
            "replica {name} did not start: {e:?}\n{}",
            log.unwrap_or_default()
        )
    })
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// A chat request (OpenAI format) or, with `anthropic`, a message on the Anthropic channel.
pub async fn ask(
    http: &reqwest::Client,
    r: &Replica,
    key: &str,
    anthropic: bool,
) -> (u16, serde_json::Value) {
    let (path, body) = if anthropic {
        (
            "/v1/messages",
            serde_json::json!({"model": "ma", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}),
        )
    } else {
        (
            "/v1/chat/completions",
            serde_json::json!({"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}),
        )
    };
    let resp = http
        .post(format!("{}{path}", r.base))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

pub async fn metrics(http: &reqwest::Client, replica: &Replica) -> String {
    http.get(format!("{}/metrics", replica.admin))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .unwrap_or_default()
}

/// The value of the first sample of `name` whose line contains `label` (0 when absent).
pub fn sample(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .next()
        .unwrap_or(0.0)
}

pub async fn account(http: &reqwest::Client, replica: &Replica) -> serde_json::Value {
    http.get(format!("{}/admin/clients/alice", replica.admin))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("admin")
        .json()
        .await
        .expect("json")
}

pub fn int(pg: &Postgres, sql: &str) -> i64 {
    let out = pg.psql(sql);
    out.parse().unwrap_or_else(|_| panic!("{sql} gave {out:?}"))
}

/// Polls `ok` every 100 ms up to `limit`.
pub async fn eventually(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ok()
}

/// The books: the balance row equals the ledger's sums, and quota = charged + remaining.
pub fn books(pg: &Postgres, quota_credits: i64) -> (i64, i64) {
    let charged = int(
        pg,
        "SELECT charged FROM quota_balance WHERE client = 'alice'",
    );
    let ledger = int(
        pg,
        "SELECT COALESCE(SUM(CASE kind WHEN 'refund' THEN -amount ELSE amount END), 0) FROM ledger WHERE client = 'alice'",
    );
    assert_eq!(charged, ledger, "balance row and ledger agree");
    let remaining = quota_credits * 1_000_000 - charged;
    (charged, remaining)
}
