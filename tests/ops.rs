//! Operations end to end (R2.4–R2.6, R12.2, R13): hot reload, admin endpoints, h2c, and the
//! real binary's `check`, `explain`, SIGHUP and SIGTERM drain.
use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

fn one_channel(mocks: &std::collections::HashMap<String, MockUpstream>, models: &[&str]) -> String {
    fill(
        &format!("channels:\n{}{CLIENTS}", channel("up", "{up}", 0, models)),
        mocks,
    )
}

#[tokio::test]
async fn reload_swaps_tables_and_an_invalid_file_keeps_the_old_one() {
    let mocks = mocks(&["up"]).await;
    let gw = start_gw(&one_channel(&mocks, &["m1"])).await;
    assert_eq!(gw.chat("m2", false).await.status(), 404);
    gw.rewrite(&one_channel(&mocks, &["m1", "m2"]));
    assert!(gw.wait_generation(2).await, "reload applied");
    assert_eq!(gw.chat("m2", false).await.status(), 200);
    // Broken file: unknown key. The old table keeps serving; the error is counted.
    gw.rewrite(&format!("{}bogus_key: 1\n", one_channel(&mocks, &["m1"])));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(gw.running.as_ref().unwrap().gateway.generation(), 2);
    assert_eq!(gw.chat("m2", false).await.status(), 200);
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("switchyard_config_reload_total{result=\"error\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("switchyard_config_generation 2"));
    gw.stop().await;
}

#[tokio::test]
async fn in_flight_stream_finishes_on_the_table_it_started_with() {
    let mocks = mocks(&["up", "other"]).await;
    mocks["up"].set_default(Behavior::Stream {
        chunks: 6,
        delay: Duration::from_millis(150),
    });
    let gw = start_gw(&one_channel(&mocks, &["m"])).await;
    let response = gw.chat("m", true).await;
    assert_eq!(response.status(), 200);
    // Remove the channel while the stream is running.
    gw.rewrite(&fill(
        &format!(
            "channels:\n{}{CLIENTS}",
            channel("other", "{other}", 0, &["m"])
        ),
        &mocks,
    ));
    let text = response.text().await.unwrap();
    assert!(
        text.contains("[DONE]") && text.contains("chunk 5"),
        "{text}"
    );
    assert!(gw.wait_generation(2).await);
    let r2 = gw.chat("m", false).await;
    assert_eq!(r2.headers()["x-mock-name"], "other");
    gw.stop().await;
}

#[tokio::test]
async fn disabled_state_survives_reload_by_channel_name() {
    let mocks = mocks(&["up", "b"]).await;
    let body = |extra: &str| {
        fill(
            &format!(
                "channels:\n{}{}{extra}{CLIENTS}",
                channel("up", "{up}", 10, &["m"]),
                channel("b", "{b}", 0, &["m"])
            ),
            &mocks,
        )
    };
    let gw = start_gw(&body("")).await;
    assert_eq!(gw.admin_post("/admin/channels/up/disable").await, 200);
    assert_eq!(gw.chat("m", false).await.headers()["x-mock-name"], "b");
    gw.rewrite(&body("routing:\n  retry_times: 4\n"));
    assert!(gw.wait_generation(2).await);
    assert_eq!(
        gw.chat("m", false).await.headers()["x-mock-name"],
        "b",
        "still disabled after reload"
    );
    assert_eq!(gw.admin_post("/admin/channels/up/enable").await, 200);
    assert_eq!(gw.chat("m", false).await.headers()["x-mock-name"], "up");
    assert_eq!(gw.admin_post("/admin/channels/nope/enable").await, 404);
    gw.stop().await;
}

#[tokio::test]
async fn admin_endpoints_health_metrics_explain() {
    let mocks = mocks(&["up"]).await;
    let gw = start_gw(&one_channel(&mocks, &["m"])).await;
    let http = reqwest::Client::new();
    assert_eq!(
        http.get(format!("{}/healthz", gw.admin))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.get(format!("{}/readyz", gw.admin))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.get(format!("{}/admin/channels", gw.admin))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    gw.chat("m", false).await;
    let metrics = gw.metrics().await;
    for name in [
        "switchyard_requests_total",
        "switchyard_attempts_total",
        "switchyard_request_duration_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "{name} missing");
    }
    let (s, v) = gw.admin_get("/admin/explain?client=alice&model=m").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["routes"][0]["tiers"][0]["candidates"][0]["name"], "up");
    assert_eq!(
        v["sample_attempt_order_if_every_attempt_fails"][0]["channel"],
        "up"
    );
    let (s, _) = gw.admin_get("/admin/explain?client=nobody&model=m").await;
    assert_eq!(s, 400);
    let (s, v) = gw.admin_get("/admin/channels").await;
    assert_eq!(s, 200);
    assert_eq!(v["channels"][0]["name"], "up");
    gw.stop().await;
}

#[tokio::test]
async fn h2c_clients_are_served() {
    let mocks = mocks(&["up"]).await;
    let gw = start_gw(&one_channel(&mocks, &["m"])).await;
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .json(&json!({"model": "m", "stream": true, "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status(), 200);
    let mut chunks = response.bytes_stream();
    let mut all = Vec::new();
    while let Some(b) = chunks.next().await {
        all.extend_from_slice(&b.unwrap());
    }
    assert!(String::from_utf8_lossy(&all).contains("[DONE]"));
    gw.stop().await;
}

#[test]
fn check_command_reports_every_error_with_key_paths() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "channels:\n  a:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n    keys: [\"sk-secret-value-1\"]\n    models: [m]\nclients:\n  alice:\n    key: k\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(BIN)
        .args(["check", "--explain", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("a") && text.contains("max_retries"), "{text}");
    assert!(!text.contains("sk-secret-value-1"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "routing:\n  retry_times: -1\nresilience:\n  retry:\n    retry_on: \"5x9\"\nchannels:\n  a:\n    base_url: http://127.0.0.1:9/v1\n    weight: -5\n    resilience:\n      retry: {backoff_factor: 0.5}\nbogus: true\n").unwrap();
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for key in [
        "routing.retry_times",
        "resilience.retry.retry_on",
        "channels.a.weight",
        "bogus",
    ] {
        assert!(err.contains(key), "missing {key} in:\n{err}");
    }
    assert!(err.contains("bad.yaml"));
    let out = Command::new(BIN)
        .args(["check", "--config", "/nonexistent/x.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("switchyard"));
}

#[test]
fn explain_command_prints_tiers_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("c.yaml");
    std::fs::write(&config_path, "channels:\n  hi:\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n    priority: 10\n  lo:\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\nclients:\n  alice:\n    key: k\n").unwrap();
    let out = Command::new(BIN)
        .args(["explain", "--client", "alice", "--model", "m", "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let order = body["sample_attempt_order_if_every_attempt_fails"]
        .as_array()
        .unwrap();
    assert_eq!(order[0]["channel"], "hi");
    assert_eq!(order[1]["channel"], "lo");
}

/// Spawn the real binary; returns (child, client base, admin base).
fn spawn(config: &std::path::Path) -> (Child, String, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut listen = String::new();
    let mut admin = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("switchyard ready") {
            for part in line.split_whitespace() {
                if let Some(v) = part.strip_prefix("listen=") {
                    listen = v.to_string();
                }
                if let Some(v) = part.strip_prefix("admin=") {
                    admin = v.to_string();
                }
            }
            break;
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, format!("http://{listen}"), format!("http://{admin}"))
}

/// Kills the child if the test fails before it exits, so no server outlives the test.
struct Reap(Option<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn signal(child: &Child, sig: &str) {
    Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
}

#[tokio::test]
async fn binary_reloads_on_sighup_and_drains_streams_on_sigterm() {
    let mocks = mocks(&["up"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    let write = |models: &[&str]| {
        std::fs::write(
            &cfg,
            format!("{}{}", head(dir.path()), one_channel(&mocks, models)),
        )
        .unwrap()
    };
    write(&["m1"]);
    let (child, base, admin) = spawn(&cfg);
    let mut reap = Reap(Some(child));
    let http = reqwest::Client::new();
    let chat = |model: &str, stream: bool| {
        http.post(format!("{base}/v1/chat/completions"))
            .bearer_auth(ALICE)
            .json(&json!({"model": model, "stream": stream, "messages": []}))
            .send()
    };
    assert_eq!(chat("m1", false).await.unwrap().status(), 200);
    write(&["m1", "m2"]);
    signal(reap.0.as_ref().unwrap(), "-HUP");
    let mut ok = false;
    for _ in 0..100 {
        if chat("m2", false).await.unwrap().status() == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "m2 served after SIGHUP");
    let ready = http.get(format!("{admin}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    // A slow stream in flight when SIGTERM arrives still finishes.
    mocks["up"].set_default(Behavior::Stream {
        chunks: 5,
        delay: Duration::from_millis(200),
    });
    let response = chat("m1", true).await.unwrap();
    assert_eq!(response.status(), 200);
    signal(reap.0.as_ref().unwrap(), "-TERM");
    let text = response.text().await.unwrap();
    assert!(text.contains("[DONE]"), "stream drained: {text}");
    let mut child = reap.0.take().unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        chat("m1", false).await.is_err(),
        "listener closed after shutdown"
    );
}

/// A SIGHUP arriving the moment the gateway reports ready (before any request) reloads it;
/// it never meets the default action and ends the process (R2.4, R13).
#[tokio::test]
async fn sighup_right_after_start_reloads_and_never_kills() {
    let mocks = mocks(&["up"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    std::fs::write(
        &cfg,
        format!("{}{}", head(dir.path()), one_channel(&mocks, &["m1"])),
    )
    .unwrap();
    for _ in 0..5 {
        let (child, base, _admin) = spawn(&cfg);
        let mut reap = Reap(Some(child));
        signal(reap.0.as_ref().unwrap(), "-HUP");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let alive = reap.0.as_mut().unwrap().try_wait().unwrap().is_none();
        assert!(alive, "the gateway exited on an early SIGHUP");
        let http = reqwest::Client::new()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(ALICE)
            .json(&json!({"model": "m1", "messages": []}))
            .send()
            .await
            .unwrap();
        assert_eq!(http.status(), 200);
    }
}
