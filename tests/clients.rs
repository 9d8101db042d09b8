//! What SDKs and coding agents expect of the client surface (B-client-compat; R1.1,
//! R1.4, R11.1): `GET /v1/models/{id}`, Anthropic shapes and `request-id` for Anthropic
//! callers, free token counting, 426 for WebSocket upgrades, bodiless HEAD on HTTP/1 and
//! HTTP/2, `HEAD /` without auth, and channel model patterns.
use crate::support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `a` serves `gpt-x` and `org/model`, `claude` (anthropic kind) serves `claude-x`.
async fn gw_with(
    extra_client: &str,
    pricing: &str,
) -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a", "claude"]).await;
    let yaml = fill(
        &format!(
            "channels:\n{}  claude:\n    kind: anthropic\n    base_url: {{claude}}\n    keys: [\"sk-ant-up\"]\n    models: [claude-x]\nclients:\n  alice:\n    key: {ALICE}\n{extra_client}{pricing}",
            channel("a", "{a}", 0, &["gpt-x", "\"org/model\""]),
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

async fn get(gw: &Gw, path: &str, anthropic: bool) -> reqwest::Response {
    let mut rq = gw.http.get(format!("{}{path}", gw.base));
    rq = if anthropic {
        rq.header("x-api-key", ALICE)
            .header("anthropic-version", "2023-06-01")
    } else {
        rq.bearer_auth(ALICE)
    };
    rq.send().await.unwrap()
}

/// The openai SDK's `models.retrieve` (`GET /v1/models/{id}`, the id percent-encoded).
#[tokio::test]
async fn models_retrieve_answers_like_openai() {
    let (gw, m) = gw_with("", "").await;
    let response = get(&gw, "/v1/models/gpt-x", false).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        (body["id"].as_str(), body["object"].as_str()),
        (Some("gpt-x"), Some("model"))
    );
    assert!(
        body["created"].is_number() && body["owned_by"].is_string(),
        "{body}"
    );
    let response = get(&gw, "/v1/models/org%2Fmodel", false).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["id"], "org/model");
    let response = get(&gw, "/v1/models/not-served", false).await;
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    let response = gw
        .http
        .get(format!("{}/v1/models/gpt-x", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(m["a"].calls() + m["claude"].calls(), 0);
    gw.stop().await;
}

/// Callers sending `anthropic-version` get Anthropic's model shapes and error shapes, and every
/// Anthropic-format answer carries `request-id` (what the Anthropic SDK reads).
#[tokio::test]
async fn anthropic_callers_get_anthropic_shapes_and_request_id() {
    let (gw, _m) = gw_with("", "").await;
    let response = get(&gw, "/v1/models", true).await;
    assert_eq!(response.status(), 200);
    let rid = response.headers()["request-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(response.headers()["x-request-id"], rid.as_str());
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["has_more"], false, "{body}");
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"claude-x"), "{body}");
    assert!(
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["type"] == "model"),
        "{body}"
    );
    let response = get(&gw, "/v1/models/claude-x", true).await;
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        (body["type"].as_str(), body["id"].as_str()),
        (Some("model"), Some("claude-x"))
    );
    let response = get(&gw, "/v1/models/nope", true).await;
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error", "{body}");
    // A relayed message and an error on a /v1/messages sub-path: request-id, Anthropic shape.
    let msg = json!({"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let response = gw
        .http
        .post(format!("{}/v1/messages", gw.base))
        .header("x-api-key", ALICE)
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("request-id"));
    for (path, key) in [
        ("/v1/messages/count_tokens", "wrong-key"),
        ("/v1/messages/nope", ALICE),
    ] {
        let response = gw
            .http
            .post(format!("{}{path}", gw.base))
            .header("x-api-key", key)
            .json(&msg)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_client_error(), "{path}");
        assert!(response.headers().contains_key("request-id"), "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["type"], "error", "{path}: {body}");
    }
    // OpenAI callers keep OpenAI's list shape.
    let body: serde_json::Value = get(&gw, "/v1/models", false).await.json().await.unwrap();
    assert_eq!(body["object"], "list");
    gw.stop().await;
}

/// R11.1: `/v1/messages/count_tokens` is free upstream; a client whose quota could not even
/// cover a precharge still counts tokens, and nothing reaches the ledger.
#[tokio::test]
async fn count_tokens_is_never_precharged_or_billed() {
    let (gw, m) = gw_with(
        "    quota: 1\n",
        "pricing:\n  claude-x: {input: 1000000, output: 1000000}\n",
    )
    .await;
    let body = json!({"model": "claude-x", "messages": [{"role": "user", "content": "count me"}]});
    for _ in 0..3 {
        let response = gw
            .http
            .post(format!("{}/v1/messages/count_tokens", gw.base))
            .header("x-api-key", ALICE)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    assert_eq!(m["claude"].calls_to("/v1/messages/count_tokens"), 3);
    gw.flush().await;
    let (_, a) = gw.admin_get("/admin/clients/alice").await;
    assert_eq!(
        (a["charged_micro"].as_i64(), a["refunded_micro"].as_i64()),
        (Some(0), Some(0)),
        "{a}"
    );
    // The same client is refused a real message (the quota check is live).
    let msg = json!({"model": "claude-x", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let response = gw
        .http
        .post(format!("{}/v1/messages", gw.base))
        .header("x-api-key", ALICE)
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 402);
    gw.stop().await;
}

async fn raw(addr: &str, req: &str, wait: Duration) -> String {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, socket.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Codex tries `GET /v1/responses` with `Upgrade: websocket` first: 426 at once.
#[tokio::test]
async fn websocket_upgrades_get_426_at_once() {
    let (gw, m) = gw_with("", "").await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let req = format!("GET /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ALICE}\r\nconnection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    let started = Instant::now();
    let resp = raw(&addr, &req, Duration::from_millis(800)).await;
    assert!(resp.starts_with("HTTP/1.1 426"), "{resp}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(resp.contains("upgrade_not_supported"), "{resp}");
    assert_eq!(m["a"].calls(), 0);
    gw.stop().await;
}

/// `HEAD /` answers 200 without auth; HEAD answers carry no body over HTTP/1 or HTTP/2.
#[tokio::test]
async fn head_has_no_body_on_any_protocol() {
    let (gw, _m) = gw_with("", "").await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let resp = raw(
        &addr,
        "HEAD / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("\r\n\r\n"), "a body followed: {resp:?}");
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    for (path, auth) in [
        ("/", false),
        ("/v1/models", true),
        ("/v1/models/gpt-x", true),
        ("/v1/nope", true),
    ] {
        let mut rq = h2.head(format!("{}{path}", gw.base));
        if auth {
            rq = rq.bearer_auth(ALICE);
        }
        let response = rq.send().await.unwrap();
        assert_eq!(response.version(), reqwest::Version::HTTP_2);
        let status = response.status().as_u16();
        let body = response.bytes().await.expect("a clean HTTP/2 HEAD answer");
        assert!(body.is_empty(), "{path}: {} bytes of body", body.len());
        assert_eq!(status, if path == "/v1/nope" { 404 } else { 200 }, "{path}");
    }
    gw.stop().await;
}

/// Channel model patterns: a new client default (`claude-next-9`) is served by the pattern
/// channel with its name unchanged; an exact name wins over a pattern of higher priority;
/// `GET /v1/models/{id}` and explain know about patterns.
#[tokio::test]
async fn model_patterns_serve_new_names_and_exact_names_win() {
    let mocks = mocks(&["pat", "exact"]).await;
    let yaml = fill(
        &format!(
            "channels:\n{}{}{CLIENTS}",
            channel("pat", "{pat}", 10, &["\"claude-*\"", "\"gpt-5*\""]),
            channel("exact", "{exact}", 0, &["claude-exact-1"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("claude-next-9", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "pat");
    assert_eq!(
        mocks["pat"].requests()[0].json().unwrap()["model"],
        "claude-next-9"
    );
    assert_eq!(route(&gw.chat("gpt-5.4-mini", false).await), "pat");
    let response = gw.chat("claude-exact-1", false).await;
    assert_eq!(
        route(&response),
        "exact",
        "an exact name wins over a pattern"
    );
    assert_eq!(gw.chat("gpt-4o", false).await.status(), 404);
    assert_eq!(
        get(&gw, "/v1/models/claude-next-9", false).await.status(),
        200
    );
    let (s, v) = gw
        .admin_get("/admin/explain?client=alice&model=claude-next-9")
        .await;
    assert_eq!(s, 200);
    let cand = &v["routes"][0]["tiers"][0]["candidates"][0];
    assert_eq!(cand["matched_pattern"], "claude-*", "{v}");
    let (_, v) = gw
        .admin_get("/admin/explain?client=alice&model=claude-exact-1")
        .await;
    let cand = &v["routes"][0]["tiers"][0]["candidates"][0];
    assert_eq!(
        (cand["name"].as_str(), &cand["matched_pattern"]),
        (Some("exact"), &serde_json::Value::Null),
        "{v}"
    );
    gw.stop().await;
}

/// R12.2: requests refused before any upstream attempt (400, 401, 402, 404, 413,
/// 426) are counted by status class and listed in the request log with their code.
#[tokio::test]
async fn rejected_requests_are_counted_and_listed() {
    let (gw, m) = gw_with(
        "    quota: 1\n",
        "limits:\n  max_body_bytes: 4000\npricing:\n  gpt-x: {input: 1000000, output: 1000000}\n",
    )
    .await;
    let before = four_xx(&gw.metrics().await);
    let msgs = json!([{"role": "user", "content": "hi"}]);
    let mut want = vec![];
    let response = gw
        .post(
            "/v1/chat/completions",
            "sk-wrong",
            json!({"model": "gpt-x", "messages": msgs}),
        )
        .await;
    want.push((response.status().as_u16(), "invalid_api_key"));
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            json!({"model": "unknown-model", "messages": msgs}),
        )
        .await;
    want.push((response.status().as_u16(), "model_not_found"));
    let response = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    want.push((response.status().as_u16(), "invalid_json"));
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            json!({"model": "gpt-x", "messages": [{"role": "user", "content": "x".repeat(5000)}]}),
        )
        .await;
    want.push((response.status().as_u16(), "request_too_large"));
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            json!({"model": "gpt-x", "messages": msgs}),
        )
        .await;
    want.push((response.status().as_u16(), "insufficient_quota"));
    let response = gw
        .post("/v1/undeclared", ALICE, json!({"model": "gpt-x"}))
        .await;
    want.push((response.status().as_u16(), "path_not_found"));
    assert_eq!(
        want.iter().map(|w| w.0).collect::<Vec<_>>(),
        vec![401, 404, 400, 413, 402, 404]
    );
    assert_eq!(four_xx(&gw.metrics().await) - before, want.len() as u64);
    gw.flush().await;
    let (_, v) = gw.admin_get("/admin/requests?limit=20").await;
    let rows = v["requests"].as_array().unwrap();
    for (status, code) in &want {
        assert!(
            rows.iter()
                .any(|r| r["final_status"] == *status && r["error_code"] == *code),
            "{status} {code} not listed: {v}"
        );
    }
    let wrong = rows
        .iter()
        .find(|r| r["error_code"] == "invalid_api_key")
        .unwrap();
    assert_eq!(wrong["client"], "");
    let unknown = rows
        .iter()
        .find(|r| r["error_code"] == "model_not_found")
        .unwrap();
    assert_eq!(
        (unknown["client"].as_str(), unknown["public_model"].as_str()),
        (Some("alice"), Some("unknown-model"))
    );
    assert_eq!(m["a"].calls(), 0);
    gw.stop().await;
}

fn four_xx(metrics: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with("switchyard_requests_total{") && l.contains("status=\"4xx\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// B-native-compat on the native Anthropic path: a history `thinking` block with an empty
/// signature (written for the client by another upstream through a translation) is dropped
/// before the request reaches an Anthropic channel, which refuses it (the mock does, as
/// Anthropic does) — also now that the request's body edits are made from its one parse.
#[tokio::test]
async fn an_unsigned_thinking_block_never_reaches_an_anthropic_channel() {
    let (gw, mocks) = gw_with("", "").await;
    let body = json!({"model": "claude-x", "max_tokens": 50, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": ""},
            {"type": "text", "text": "hello"}]},
        {"role": "user", "content": "and?"}]});
    let response = gw.post("/v1/messages", ALICE, body).await;
    assert_eq!(
        response.status(),
        200,
        "{}",
        response.text().await.unwrap_or_default()
    );
    let sent = mocks["claude"].requests()[0].json().expect("a JSON body");
    assert_eq!(
        sent["messages"][1]["content"],
        json!([{"type": "text", "text": "hello"}]),
        "{sent}"
    );
    gw.stop().await;
}
