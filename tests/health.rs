//! End-to-end channel health (R6, R7, R2.5): breakers skip and fast-fail, auto-disable
//! persists across restarts and is lifted by the admin API or a probe, reloads keep state.
#[path = "health/active_probe.rs"]
mod active_probe;
use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use support::*;

/// Shared resilience block: no same-target retries (no backoff sleeps), a breaker that opens
/// after two failures and stays open for `timeout`.
fn resilience(timeout: &str) -> String {
    format!(
        "resilience:\n  retry:\n    max_retries: 0\n  circuit_breaker:\n    failure_threshold: 2\n    success_threshold: 1\n    timeout: {timeout}\n"
    )
}

fn config(extra: &str, channels: &[String], mocks: &HashMap<String, MockUpstream>) -> String {
    fill(
        &format!("{extra}channels:\n{}{CLIENTS}", channels.concat()),
        mocks,
    )
}

async fn channel_json(gw: &Gw, name: &str) -> Value {
    let (s, v) = gw.admin_get("/admin/channels").await;
    assert_eq!(s, 200, "{v}");
    v["channels"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

async fn error_message(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap_or(Value::Null);
    body["error"]["message"].as_str().unwrap_or("").to_string()
}

fn status500() -> Behavior {
    Behavior::Status {
        code: 500,
        body: None,
    }
}

fn status(code: u16) -> Behavior {
    Behavior::Status { code, body: None }
}

#[tokio::test]
async fn open_breaker_skips_the_failing_primary() {
    let mocks = mocks(&["hp_primary", "hp_backup"]).await;
    mocks["hp_primary"].set_default(status500());
    let yaml = config(
        &resilience("60s"),
        &[
            channel("hp_primary", "{hp_primary}", 10, &["m"]),
            channel("hp_backup", "{hp_backup}", 0, &["m"]),
        ],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..2 {
        let response = gw.chat("m", false).await;
        assert_eq!(response.status(), 200);
        assert_eq!(route(&response), "hp_primary->hp_backup");
    }
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        route(&response),
        "hp_backup",
        "the open breaker leaves the primary out"
    );
    assert_eq!(mocks["hp_primary"].calls_to("chat/completions"), 2);
    let channel = channel_json(&gw, "hp_primary").await;
    assert_eq!(channel["health"]["breaker"]["state"], "open", "{channel}");
    assert_eq!(channel["health"]["status"], "offline", "{channel}");
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("switchyard_circuit_breaker_state{channel=\"hp_primary\"} 2"),
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn open_breaker_without_backup_fails_fast_with_the_breaker_503() {
    let mocks = mocks(&["hp_solo"]).await;
    mocks["hp_solo"].set_default(status500());
    let yaml = config(
        &resilience("60s"),
        &[channel("hp_solo", "{hp_solo}", 0, &["m"])],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..2 {
        assert_eq!(gw.chat("m", false).await.status(), 500);
    }
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(
        error_message(response).await,
        "circuit breaker is open - provider hp_solo temporarily unavailable"
    );
    assert_eq!(
        mocks["hp_solo"].calls_to("chat/completions"),
        2,
        "no upstream call"
    );
    gw.stop().await;
}

#[tokio::test]
async fn breaker_probe_after_timeout_closes_it() {
    let mocks = mocks(&["hp_heal"]).await;
    mocks["hp_heal"].set_default(status500());
    let yaml = config(
        &resilience("200ms"),
        &[channel("hp_heal", "{hp_heal}", 0, &["m"])],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..2 {
        assert_eq!(gw.chat("m", false).await.status(), 500);
    }
    assert_eq!(gw.chat("m", false).await.status(), 503);
    mocks["hp_heal"].set_default(Behavior::Ok);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        gw.chat("m", false).await.status(),
        200,
        "the probe succeeds"
    );
    assert_eq!(gw.chat("m", false).await.status(), 200, "closed again");
    let channel = channel_json(&gw, "hp_heal").await;
    assert_eq!(channel["health"]["breaker"]["state"], "closed", "{channel}");
    gw.stop().await;
}

#[tokio::test]
async fn reload_keeps_an_open_breaker_open() {
    let mocks = mocks(&["hp_reload", "hp_other"]).await;
    mocks["hp_reload"].set_default(status500());
    let chans = |w: u32| {
        vec![
            format!(
                "{}    weight: {w}\n",
                channel("hp_reload", "{hp_reload}", 0, &["m"])
            ),
            channel("hp_other", "{hp_other}", 0, &["other"]),
        ]
    };
    let gw = start_gw(&config(&resilience("60s"), &chans(1), &mocks)).await;
    for _ in 0..2 {
        assert_eq!(gw.chat("m", false).await.status(), 500);
    }
    // New weight and a higher threshold: the breaker keeps its state and counters (R2.5).
    let raised = resilience("60s").replace("failure_threshold: 2", "failure_threshold: 3");
    gw.rewrite(&config(&raised, &chans(5), &mocks));
    assert!(gw.wait_generation(2).await, "reload applied");
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert!(error_message(response)
        .await
        .contains("circuit breaker is open"));
    assert_eq!(mocks["hp_reload"].calls_to("chat/completions"), 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_401_disables_the_channel_across_restart_until_enabled() {
    let mocks = mocks(&["hp_auth"]).await;
    mocks["hp_auth"].set_default(status(401));
    let yaml = config("", &[channel("hp_auth", "{hp_auth}", 0, &["m"])], &mocks);
    let gw = start_gw(&yaml).await;
    assert_eq!(gw.chat("m", false).await.status(), 401);
    let channel = channel_json(&gw, "hp_auth").await;
    assert_eq!(channel["enabled"], false, "{channel}");
    assert_eq!(channel["disabled"]["auto"], true, "{channel}");
    assert!(
        channel["disabled"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("401"),
        "{channel}"
    );
    assert!(gw
        .metrics()
        .await
        .contains("switchyard_channel_disabled{channel=\"hp_auth\"} 1"));

    // Restart on the same storage directory.
    gw.flush().await;
    let Gw { running, dir, .. } = gw;
    running.expect("running").shutdown().await;
    let gw = start_in(dir, &yaml).await;
    let channel = channel_json(&gw, "hp_auth").await;
    assert_eq!(
        channel["enabled"], false,
        "disable survives restart: {channel}"
    );
    assert_eq!(channel["disabled"]["auto"], true, "{channel}");
    mocks["hp_auth"].set_default(Behavior::Ok);
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(
        mocks["hp_auth"].calls_to("chat/completions"),
        1,
        "disabled: not called"
    );

    assert_eq!(gw.admin_post("/admin/channels/hp_auth/enable").await, 200);
    assert_eq!(gw.chat("m", false).await.status(), 200);
    gw.flush().await;
    let Gw { running, dir, .. } = gw;
    running.expect("running").shutdown().await;
    let gw = start_in(dir, &yaml).await;
    let channel = channel_json(&gw, "hp_auth").await;
    assert_eq!(channel["enabled"], true, "enable persisted: {channel}");
    gw.stop().await;
}

#[tokio::test]
async fn a_429_never_disables() {
    let mocks = mocks(&["hp_busy"]).await;
    mocks["hp_busy"].set_default(status(429));
    let yaml = config("", &[channel("hp_busy", "{hp_busy}", 0, &["m"])], &mocks);
    let gw = start_gw(&yaml.replace(
        "channels:",
        "resilience:\n  retry:\n    max_retries: 0\nchannels:",
    ))
    .await;
    for _ in 0..3 {
        assert_eq!(gw.chat("m", false).await.status(), 429);
    }
    let channel = channel_json(&gw, "hp_busy").await;
    assert_eq!(channel["enabled"], true, "{channel}");
    assert_eq!(channel["disabled"], Value::Null, "{channel}");
    assert_eq!(channel["health"]["window"]["errors"], 3, "{channel}");
    assert_eq!(channel["health"]["status"], "degraded", "{channel}");
    gw.stop().await;
}

#[tokio::test]
async fn multi_key_channel_disables_a_key_then_the_channel() {
    let mocks = mocks(&["hp_keys"]).await;
    mocks["hp_keys"].require_key(Some("k-good".into()));
    let yaml = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\nchannels:\n  hp_keys:\n    kind: openai\n    base_url: {{hp_keys}}\n    keys: [\"k-bad\", \"k-good\"]\n    models: [m]\n{CLIENTS}"
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..2 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    let channel = channel_json(&gw, "hp_keys").await;
    assert_eq!(
        channel["disabled_keys"],
        serde_json::json!([0]),
        "{channel}"
    );
    assert_eq!(channel["enabled"], true, "{channel}");
    let bad_calls = |m: &MockUpstream| {
        m.requests()
            .iter()
            .filter(|r| r.header("authorization") == Some("Bearer k-bad"))
            .count()
    };
    let before = bad_calls(&mocks["hp_keys"]);
    assert_eq!(before, 1, "the bad key was used once");
    for _ in 0..3 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    assert_eq!(
        bad_calls(&mocks["hp_keys"]),
        1,
        "the disabled key is skipped"
    );

    mocks["hp_keys"].require_key(Some("k-other".into()));
    assert_eq!(gw.chat("m", false).await.status(), 401);
    let channel = channel_json(&gw, "hp_keys").await;
    assert_eq!(
        channel["disabled_keys"],
        serde_json::json!([0, 1]),
        "{channel}"
    );
    assert_eq!(channel["enabled"], false, "every key disabled: {channel}");
    gw.stop().await;
}

#[tokio::test]
async fn probe_re_enables_an_auto_disabled_channel() {
    let mocks = mocks(&["hp_probe"]).await;
    mocks["hp_probe"].set_default(status(401));
    let yaml = config(
        "auto_disable:\n  probe_interval: 200ms\n",
        &[channel("hp_probe", "{hp_probe}", 0, &["m"])],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    assert_eq!(gw.chat("m", false).await.status(), 401);
    assert_eq!(channel_json(&gw, "hp_probe").await["enabled"], false);
    // Still failing: the probe does not lift it.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(channel_json(&gw, "hp_probe").await["enabled"], false);
    assert!(mocks["hp_probe"].calls_to("models") >= 1, "probed");
    mocks["hp_probe"].set_default(Behavior::Ok);
    let mut enabled = false;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if channel_json(&gw, "hp_probe").await["enabled"] == true {
            enabled = true;
            break;
        }
    }
    assert!(enabled, "a successful probe re-enables the channel");
    assert_eq!(gw.chat("m", false).await.status(), 200);
    gw.stop().await;
}

#[tokio::test]
async fn models_list_hides_models_whose_channels_are_all_down() {
    let mocks = mocks(&["hp_up", "hp_down"]).await;
    mocks["hp_down"].set_default(status(401));
    let yaml = config(
        "",
        &[
            channel("hp_up", "{hp_up}", 0, &["alive"]),
            channel("hp_down", "{hp_down}", 0, &["dead"]),
        ],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let list = |gw: &Gw| {
        let req = gw
            .http
            .get(format!("{}/v1/models", gw.base))
            .bearer_auth(ALICE)
            .send();
        async move {
            let body: Value = req.await.expect("models").json().await.expect("json");
            let mut ids: Vec<String> = body["data"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|m| m["id"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            ids.sort();
            ids
        }
    };
    assert_eq!(list(&gw).await, ["alive", "dead"]);
    assert_eq!(gw.chat("dead", false).await.status(), 401);
    assert_eq!(list(&gw).await, ["alive"]);
    // Every channel down: everything is listed again.
    assert_eq!(gw.admin_post("/admin/channels/hp_up/disable").await, 200);
    assert_eq!(list(&gw).await, ["alive", "dead"]);
    gw.stop().await;
}
