//! `make soak`: the real gateway binary under steady concurrent load for a bounded time,
//! against a mock channel that draws a fault per call (errors, 429s, hangs, hidden errors,
//! truncated bodies, cut streams, coalesced and split frames) with one healthy backup.
//!
//! Checks every answer's content (an empty "successful" stream is a failure; an error answer
//! must be a well-formed error object), counts error answers and post-commit incomplete
//! streams apart, checks the books balance (quota = charged +
//! remaining) and that the gateway's memory settles, and prints one summary line. Exits 1
//! when a check fails. Targets only 127.0.0.1.
//!
//! `soak --gateway target/debug/switchyard [--duration 60s] [--concurrency 32]`
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockUpstream};

#[derive(Parser, Debug)]
struct Args {
    /// The gateway binary.
    #[arg(long)]
    gateway: String,
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    duration: Duration,
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    incomplete: AtomicU64,
    bad: AtomicU64,
    errors: AtomicU64,
}

const KEY: &str = "sk-soak";
const TEXT: &str = "chunk 0 chunk 1 chunk 2 ";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

fn config(dir: &std::path::Path, chaos: &str, healthy: &str, port: u16, admin: u16) -> String {
    let db = dir.join("soak.db");
    [
        format!("listen: 127.0.0.1:{port}"),
        format!("admin:\n  listen: 127.0.0.1:{admin}\n  token: soak"),
        format!("storage:\n  path: {}", db.display()),
        "timeouts:\n  upstream_header: 1s\n  first_byte: 1s\n  non_stream: 3s\n  keepalive: 1s".into(),
        "routing:\n  retry_times: 2\n  retry_budget: {ratio: 1.0, min_per_second: 1000}".into(),
        "resilience:\n  retry:\n    initial_backoff: 10ms\n    max_backoff: 50ms".into(),
        format!("channels:\n  chaos:\n    kind: openai\n    base_url: {chaos}\n    keys: [k1]\n    models: [m]\n    priority: 10\n    auto_ban: false\n    resilience:\n      circuit_breaker: {{failure_threshold: 50, timeout: 1s}}"),
        format!("  healthy:\n    kind: openai\n    base_url: {healthy}\n    keys: [k2]\n    models: [m]"),
        format!("clients:\n  soak:\n    key: {KEY}\n    quota: 1000000000"),
        "pricing:\n  m: {input: 1, output: 2}\n".into(),
    ]
    .join("\n")
}

fn rss_kib(child: &Child) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One request; its answer's content is checked.
async fn one(http: &reqwest::Client, base: &str, stream: bool, t: &Tally) {
    let body =
        json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let sent = http
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await;
    let Ok(r) = sent else {
        t.bad.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let counter = if status != 200 {
        // An error answer is fine when it is a well-formed error object.
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if v["error"]["message"].is_string() {
            &t.errors
        } else {
            &t.bad
        }
    } else if stream && text.contains("stream_incomplete") {
        &t.incomplete
    } else if stream {
        let content: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        if content == TEXT && text.contains("data: [DONE]") {
            &t.ok
        } else {
            &t.bad
        }
    } else {
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if v["choices"][0]["message"]["content"] == TEXT {
            &t.ok
        } else {
            &t.bad
        }
    };
    if std::ptr::eq(counter, &t.bad) && t.bad.load(Ordering::Relaxed) < 3 {
        eprintln!(
            "bad answer (stream={stream}): {}",
            &text[..text.len().min(600)]
        );
    }
    counter.fetch_add(1, Ordering::Relaxed);
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let chaos = MockUpstream::start().await?;
    chaos.set_record(false);
    chaos.set_default(Behavior::Chaos);
    let healthy = MockUpstream::start().await?;
    healthy.set_record(false);
    let dir = tempfile::tempdir()?;
    let (port, admin) = (free_port(), free_port());
    let path = dir.path().join("soak.yaml");
    std::fs::write(
        &path,
        config(
            dir.path(),
            &chaos.base_url(),
            &healthy.base_url(),
            port,
            admin,
        ),
    )?;
    let log = dir.path().join("gateway.log");
    let mut gw = Command::new(&args.gateway)
        .args(["serve", "--config"])
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let ready = Instant::now();
    while http
        .get(format!("http://127.0.0.1:{admin}/readyz"))
        .send()
        .await
        .is_err()
    {
        if ready.elapsed() > Duration::from_secs(10) {
            let _ = gw.kill();
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            anyhow::bail!("the gateway did not become ready:\n{out}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tally = Arc::new(Tally::default());
    let end = Instant::now() + args.duration;
    let mut workers = Vec::new();
    for w in 0..args.concurrency {
        let (http, base, t) = (http.clone(), base.clone(), tally.clone());
        workers.push(tokio::spawn(async move {
            let mut n = w;
            while Instant::now() < end {
                one(&http, &base, n % 2 == 0, &t).await;
                n += 1;
            }
        }));
    }
    tokio::time::sleep(args.duration / 4).await;
    let rss_mid = rss_kib(&gw);
    for w in workers {
        let _ = w.await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_end = rss_kib(&gw);
    let acct: Value = http
        .get(format!("http://127.0.0.1:{admin}/admin/clients/soak"))
        .bearer_auth("soak")
        .send()
        .await?
        .json()
        .await?;
    let _ = gw.kill();
    let _ = gw.wait();
    let n = |k: &str| acct[k].as_i64().unwrap_or(-1);
    let quota_micro = acct["quota"]
        .as_i64()
        .unwrap_or(-1)
        .saturating_mul(1_000_000);
    let books = quota_micro == n("charged_micro") + n("remaining_micro");
    let settled = rss_end <= rss_mid + rss_mid / 2 + 16 * 1024;
    let t = &*tally;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let pass = books && settled && get(&t.bad) == 0;
    println!(
        "soak {}: {}s x{} ok={} incomplete_after_commit={} bad_content={} errors={} books={} rss_kib={}->{} chaos_calls={} healthy_calls={}",
        if pass { "PASS" } else { "FAIL" },
        args.duration.as_secs(),
        args.concurrency,
        get(&t.ok),
        get(&t.incomplete),
        get(&t.bad),
        get(&t.errors),
        if books { "balanced" } else { "UNBALANCED" },
        rss_mid,
        rss_end,
        chaos.calls(),
        healthy.calls(),
    );
    std::process::exit(if pass { 0 } else { 1 })
}
