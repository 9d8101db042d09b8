//! Exposure (R1.1, R10.1, R14.3, B-path-hygiene): only the R1.1 endpoint families are routed
//! by model; any other path reaches only channels that declare it, else 404 in the caller's
//! format; dot-segments and encoded separators are refused with 400 before routing; and
//! pass-through retries follow the method.
use crate::support;

use std::time::Duration;

use serde_json::json;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn status(code: u16) -> Behavior {
    Behavior::Status { code, body: None }
}

/// Channel `a` serves model `m` and declares no path.
async fn one_model_channel() -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a"]).await;
    let yaml = fill(
        &format!("channels:\n{}{CLIENTS}", channel("a", "{a}", 0, &["m"])),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

/// Paths that create billed artifacts on the operator's account (assistants, fine-tuning
/// jobs, batches) are not reached because the body names a served model.
#[tokio::test]
async fn undeclared_paths_with_a_model_get_404_and_reach_no_upstream() {
    let (gw, m) = one_model_channel().await;
    for path in [
        "/v1/assistants",
        "/v1/fine_tuning/jobs",
        "/v1/batches",
        "/v1/vector_stores",
        "/v1/chat/completions/extra",
    ] {
        let response = gw
            .post(path, ALICE, json!({"model": "m", "input_file_id": "f"}))
            .await;
        assert_eq!(response.status(), 404, "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "path_not_found", "{path}: {body}");
    }
    // Anthropic's batch endpoint: 404 in Anthropic's shape.
    let response = gw
        .http
        .post(format!("{}/v1/messages/batches", gw.base))
        .header("x-api-key", ALICE)
        .json(&json!({"requests": [{"custom_id": "1", "params": {"model": "m"}}], "model": "m"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "not_found_error", "{body}");
    assert_eq!(m["a"].calls(), 0, "an undeclared path reached the upstream");
    // The model itself is served (the 404s above were not an unknown model).
    assert_eq!(gw.chat("m", false).await.status(), 200);
    gw.stop().await;
}

/// A declared path goes only to the channels that declare it, even when a higher-priority
/// channel serves the model named in the body.
#[tokio::test]
async fn declared_paths_reach_only_the_declaring_channels() {
    let mocks = mocks(&["hi", "decl"]).await;
    let yaml = fill(
        &format!(
            "channels:\n{}{}    paths: [/v1/assistants]\n{CLIENTS}",
            channel("hi", "{hi}", 10, &["m"]),
            channel("decl", "{decl}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..3 {
        let response = gw
            .post("/v1/assistants", ALICE, json!({"model": "m", "name": "x"}))
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(route(&response), "decl");
    }
    assert_eq!(mocks["hi"].calls(), 0);
    assert_eq!(mocks["decl"].calls_to("/v1/assistants"), 3);
    gw.stop().await;
}

async fn raw(addr: &str, req: &str) -> String {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ALICE}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Dot-segments and encoded separators are 400 before routing, in every encoding; the path
/// the family is classified from is the one the upstream receives.
#[tokio::test]
async fn dot_segments_and_encoded_separators_get_400() {
    let (gw, m) = one_model_channel().await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    for path in [
        "/v1/x/../chat/completions",
        "/v1/chat/completions/..",
        "/v1/./chat/completions",
        "/v1/%2e%2e/v1/chat/completions",
        "/v1/%2E%2E/assistants",
        "/v1/.%2e/assistants",
        "/v1/chat%2fcompletions",
        "/v1/chat/completions%2F..%2F..%2Fadmin",
        "/v1/a%5c..%5cb",
        "/v1/%252e%252e/assistants",
        "/v1/messages/..",
    ] {
        let resp = raw(&addr, &post(path, body)).await;
        assert!(resp.starts_with("HTTP/1.1 400"), "{path}: {resp}");
        let json = resp.split("\r\n\r\n").nth(1).unwrap_or("");
        if path.starts_with("/v1/messages") {
            assert!(json.contains(r#""type":"error""#), "{path}: {json}");
        } else {
            assert!(json.contains(r#""code":"invalid_path""#), "{path}: {json}");
        }
    }
    assert_eq!(m["a"].calls(), 0, "a traversal shape reached the upstream");
    // Harmless variants are normalised, and the upstream sees the normal form.
    for path in ["/v1//chat/completions", "/v1/%63hat/completions"] {
        let resp = raw(&addr, &post(path, body)).await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{path}: {resp}");
    }
    let seen: Vec<String> = m["a"].requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(seen, vec!["/v1/chat/completions"; 2]);
    gw.stop().await;
}

/// Seed 004: a pass-through request is replayed on another channel only with a safe method
/// (GET, HEAD, OPTIONS, PUT) or an `Idempotency-Key`.
#[tokio::test]
async fn pass_through_retries_follow_the_method() {
    let mocks = mocks(&["first", "second"]).await;
    let yaml = fill(
        &format!(
            "resilience:\n  circuit_breaker: {{enabled: false}}\nchannels:\n{}    paths: [/v1/files/thing]\n{}    paths: [/v1/files/thing]\n{CLIENTS}",
            channel("first", "{first}", 10, &["m"]),
            channel("second", "{second}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["first"].set_default(status(503));
    let url = format!("{}/v1/files/thing", gw.base);
    // POST without a key: one attempt, the 503 is returned.
    let response = gw
        .http
        .post(&url)
        .bearer_auth(ALICE)
        .json(&json!({"purpose": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(route(&response), "first");
    for method in ["DELETE", "PATCH"] {
        let response = gw
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                &url,
            )
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 503, "{method}");
        assert_eq!(route(&response), "first", "{method}");
    }
    assert_eq!(mocks["second"].calls(), 0);
    // POST with an Idempotency-Key, and the safe methods: fail over.
    let response = gw
        .http
        .post(&url)
        .bearer_auth(ALICE)
        .header("idempotency-key", "op-1")
        .json(&json!({"purpose": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "first->second");
    for method in ["GET", "PUT", "OPTIONS"] {
        let response = gw
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                &url,
            )
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{method}");
        assert_eq!(route(&response), "first->second", "{method}");
    }
    gw.stop().await;
}
