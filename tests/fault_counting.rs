//! What counts against a channel (R6.4): the cooldown counts only upstream faults,
//! never a caller's 4xx; auto-disable reads the status after `status_code_mapping`; a
//! cancelled half-open probe frees its slot at once.
use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::*;

fn status(code: u16) -> Behavior {
    Behavior::Status { code, body: None }
}

/// An error body with no listed error code or type, so only the status decides.
fn plain_error(code: u16) -> Behavior {
    Behavior::Status {
        code,
        body: Some(
            r#"{"error":{"message":"no","type":"invalid_request_error","param":null,"code":null}}"#
                .into(),
        ),
    }
}

async fn channel_json(gw: &Gw, name: &str) -> Value {
    let (_, v) = gw.admin_get("/admin/channels").await;
    v["channels"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name).cloned())
        .unwrap_or(Value::Null)
}

/// R6.4 with the logical-group preset (2 in a row): two bad requests (422, which fails over) must
/// not cool the primary for everyone; two 503s do.
#[tokio::test]
async fn a_callers_4xx_never_cools_a_channel() {
    let mocks = mocks(&["cp", "cb"]).await;
    let body = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\n  cooldown:\n    consecutive_retryable_failures: 2\n    duration: 600s\nchannels:\n{}{}{CLIENTS}",
            channel("cp", "{cp}", 10, &["m"]),
            channel("cb", "{cb}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&body).await;
    for _ in 0..2 {
        mocks["cp"].push(status(422));
        let response = gw.chat("m", false).await;
        assert_eq!(route(&response), "cp->cb");
    }
    let response = gw.chat("m", false).await;
    assert_eq!(route(&response), "cp", "a caller's 4xx cooled the channel");
    assert_eq!(
        channel_json(&gw, "cp").await["health"]["cooldown_remaining_ms"],
        Value::Null
    );
    for _ in 0..2 {
        mocks["cp"].push(status(503));
        assert_eq!(route(&gw.chat("m", false).await), "cp->cb");
    }
    assert_eq!(
        route(&gw.chat("m", false).await),
        "cb",
        "upstream faults do cool it"
    );
    gw.stop().await;
}

/// R7.1 reads the mapped status: a channel mapping 403 → 401 is disabled by its 403s, one
/// mapping 401 → 400 is not disabled by its 401s.
#[tokio::test]
async fn auto_disable_reads_the_mapped_status() {
    let mocks = mocks(&["to401", "from401"]).await;
    mocks["to401"].set_default(plain_error(403));
    mocks["from401"].set_default(plain_error(401));
    let body = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\nchannels:\n{}    status_code_mapping: {{\"403\": \"401\"}}\n{}    status_code_mapping: {{\"401\": \"400\"}}\n{CLIENTS}",
            channel("to401", "{to401}", 0, &["mx"]),
            channel("from401", "{from401}", 0, &["my"])
        ),
        &mocks,
    );
    let gw = start_gw(&body).await;
    assert_eq!(gw.chat("mx", false).await.status(), 401);
    assert_eq!(gw.chat("my", false).await.status(), 400);
    let channel = channel_json(&gw, "to401").await;
    assert_eq!(
        channel["enabled"], false,
        "mapped to 401: disabled: {channel}"
    );
    let channel = channel_json(&gw, "from401").await;
    assert_eq!(
        channel["enabled"], true,
        "mapped to 400: not disabled: {channel}"
    );
    gw.stop().await;
}

/// R6.1: the half-open probe is a request whose client went away mid-attempt; the next
/// request gets the probe at once instead of a breaker 503 until the timeout frees it.
#[tokio::test]
async fn a_cancelled_half_open_probe_frees_its_slot_at_once() {
    let mocks = mocks(&["hp"]).await;
    let body = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\n  circuit_breaker:\n    failure_threshold: 1\n    success_threshold: 1\n    timeout: 1500ms\ntimeouts:\n  upstream_header: 30s\nchannels:\n{}{CLIENTS}",
            channel("hp", "{hp}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&body).await;
    mocks["hp"].push(status(500));
    assert_eq!(gw.chat("m", false).await.status(), 500);
    assert_eq!(gw.chat("m", false).await.status(), 503, "open");
    tokio::time::sleep(Duration::from_millis(1550)).await;
    // The probe hangs upstream; its client gives up.
    mocks["hp"].push(Behavior::HangBeforeHeaders(Duration::from_secs(20)));
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let response = quick
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await;
    assert!(response.is_err(), "the probe's client timed out");
    assert_eq!(
        mocks["hp"].calls_to("chat/completions"),
        2,
        "the probe reached upstream"
    );
    // Well inside the breaker timeout since the probe began: the slot is free again.
    let mut ok = false;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if gw.chat("m", false).await.status() == 200 {
            ok = true;
            break;
        }
    }
    assert!(ok, "the cancelled probe still holds the half-open slot");
    gw.stop().await;
}
