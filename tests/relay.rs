//! End-to-end relay tests (R1, R3, R9.1, R14.1, R14.2): real gateway, real sockets, mock upstreams.
use crate::support;

use serde_json::json;
use support::*;

async fn two_channel_gw() -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["up1", "claude"]).await;
    let yaml = fill(
        "channels:\n  up1:\n    kind: openai\n    base_url: {up1}\n    keys: [\"sk-up-one\"]\n    models: [gpt-4o-mini, text-embedding-3-small]\n    model_mapping: {deepseek-chat: deepseek-v3}\n    paths: [/v1/custom/echo]\n    headers: {x-extra: yes-please}\n  claude:\n    kind: anthropic\n    base_url: {claude}\n    keys: [\"sk-ant-up\"]\n    models: [claude-sonnet-4-5]\n    groups: [default]\n  vip-only:\n    kind: openai\n    base_url: {up1}\n    models: [secret-model]\n    groups: [vip]\nclients:\n  alice:\n    key: sk-test-alice\n  hashed:\n    key_sha256: \"ab0b4d28e5d1a8e8a7ba08e6c82a34e0d7a9e77ad1fe7c36b6e0de8e08e1d4ee\"\n",
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

#[tokio::test]
async fn chat_non_stream_and_stream_relay() {
    let (gw, m) = two_channel_gw().await;
    let response = gw.chat("gpt-4o-mini", false).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-request-id").is_some());
    assert_eq!(route(&response), "up1");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");

    let response = gw.chat("gpt-4o-mini", true).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    assert!(!text.contains("stream_incomplete"));
    // The upstream got our channel key, never the client's.
    let req = &m["up1"].requests()[1];
    assert_eq!(req.header("authorization"), Some("Bearer sk-up-one"));
    assert_eq!(req.header("x-extra"), Some("yes-please"));
    gw.stop().await;
}

#[tokio::test]
async fn model_mapping_rewrites_only_the_model() {
    let (gw, m) = two_channel_gw().await;
    let body = json!({"model": "deepseek-chat", "messages": [{"role": "user", "content": "x"}], "temperature": 0.5});
    let response = gw.post("/v1/chat/completions", ALICE, body).await;
    assert_eq!(response.status(), 200);
    let sent = m["up1"].requests()[0].json().unwrap();
    assert_eq!(sent["model"], "deepseek-v3");
    assert_eq!(sent["temperature"], 0.5);
    assert_eq!(sent["messages"][0]["content"], "x");
    gw.stop().await;
}

#[tokio::test]
async fn anthropic_channel_gets_x_api_key_and_client_may_use_x_api_key() {
    let (gw, m) = two_channel_gw().await;
    let response = gw
        .http
        .post(format!("{}/v1/messages", gw.base))
        .header("x-api-key", ALICE)
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let req = &m["claude"].requests()[0];
    assert_eq!(req.header("x-api-key"), Some("sk-ant-up"));
    assert!(req.header("authorization").is_none());
    assert!(req.header("anthropic-version").is_some());
    gw.stop().await;
}

#[tokio::test]
async fn auth_failures_are_401_and_call_no_upstream() {
    let (gw, m) = two_channel_gw().await;
    let body = json!({"model": "gpt-4o-mini", "messages": []});
    for key in ["", "sk-wrong", "' OR 1=1 --", &"k".repeat(10_000)] {
        let response = gw.post("/v1/chat/completions", key, body.clone()).await;
        assert_eq!(response.status(), 401, "key {key:.20}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_api_key");
    }
    let response = gw
        .http
        .post(format!("{}/v1/messages", gw.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body["type"], "error",
        "Anthropic endpoint answers in Anthropic format"
    );
    assert_eq!(m["up1"].calls() + m["claude"].calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let (gw, m) = two_channel_gw().await;
    let response = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");

    // `curl -d` sends a JSON body as a form: said as such, not as a path no channel serves
    // (it was `404 path_not_found`), in the format of the endpoint asked.
    let chat = r#"{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}"#;
    for (path, ct, error_at) in [
        (
            "/v1/chat/completions",
            "application/x-www-form-urlencoded",
            "/error/code",
        ),
        ("/v1/messages", "text/plain", "/error/type"),
    ] {
        let response = gw
            .http
            .post(format!("{}{path}", gw.base))
            .bearer_auth(ALICE)
            .header("content-type", ct)
            .body(chat)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 415, "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        let want = if path == "/v1/messages" {
            "invalid_request_error"
        } else {
            "unsupported_content_type"
        };
        assert_eq!(body.pointer(error_at).unwrap(), want, "{path}: {body}");
        let message = body.pointer("/error/message").unwrap().as_str().unwrap();
        assert!(
            message.contains("Content-Type: application/json"),
            "{message}"
        );
    }

    let response = gw.chat("no-such-model", false).await;
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-model"));

    // A model served only to another group is unknown to this client.
    let response = gw.chat("secret-model", false).await;
    assert_eq!(response.status(), 404);
    assert_eq!(m["up1"].calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn oversized_body_is_413_without_reading_it() {
    let mocks = mocks(&["up1"]).await;
    let yaml = fill(
        &format!(
            "limits:\n  max_body_bytes: 1000\nchannels:\n{}{CLIENTS}",
            channel("up1", "{up1}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let big = "x".repeat(5000);
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            json!({"model": "m", "messages": [{"role":"user","content": big}]}),
        )
        .await;
    assert_eq!(response.status(), 413);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "request_too_large");
    // Chunked (no content-length) is cut at the limit too.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..10).map(|_| Ok(vec![b' '; 500])).collect();
    let response = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(mocks["up1"].calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn models_list_comes_from_the_table_for_the_callers_group() {
    let (gw, _m) = two_channel_gw().await;
    let response = gw
        .http
        .get(format!("{}/v1/models", gw.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"gpt-4o-mini")
            && ids.contains(&"deepseek-chat")
            && ids.contains(&"claude-sonnet-4-5")
    );
    assert!(!ids.contains(&"secret-model"));
    gw.stop().await;
}

#[tokio::test]
async fn passthrough_paths_and_request_id() {
    let (gw, m) = two_channel_gw().await;
    let response = gw
        .http
        .post(format!("{}/v1/custom/echo?x=1", gw.base))
        .bearer_auth(ALICE)
        .header("x-request-id", "my-req-42")
        .json(&json!({"anything": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "my-req-42");
    let req = &m["up1"].requests()[0];
    assert_eq!(req.path, "/v1/custom/echo?x=1");
    assert_eq!(req.header("x-request-id"), Some("my-req-42"));
    let response = gw.post("/v1/not/declared", ALICE, json!({"a": 1})).await;
    assert_eq!(response.status(), 404);
    gw.stop().await;
}

#[tokio::test]
async fn weighted_split_follows_configured_ratio() {
    let mocks = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "channels:\n{}    weight: 70\n{}    weight: 30\n{CLIENTS}",
            channel("a", "{a}", 5, &["m"]),
            channel("b", "{b}", 5, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..400 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    let share_a = mocks["a"].calls() as f64 / 400.0;
    // 70/30 within sampling error (sd ≈ 2.3 pp at n = 400; allow ±8 pp).
    assert!((share_a - 0.7).abs() < 0.08, "share of a = {share_a}");
    gw.stop().await;
}
