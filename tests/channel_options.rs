//! Per-channel upstream options and per-target retry state (R9.6, R10.2):
//! `include_usage`, the Idempotency-Key on a retry after a failover, `stream_policy` on
//! `/v1/responses`, and converters fed unexpected JSON shapes.
use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::streams::*;
use support::*;

/// `channels.*.include_usage: false` leaves the client's body alone (a channel that rejects
/// `stream_options`); the default asks for usage; a client that asked still gets its chunk.
#[tokio::test]
async fn include_usage_is_a_channel_switch() {
    let (gw, m) = pair("openai", "    include_usage: false\n").await;
    let text = gw.chat("m", true).await.text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    let sent = m["a"].requests()[0].json().unwrap();
    assert!(sent.get("stream_options").is_none(), "{sent}");
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["usage_estimated"], true, "no usage was asked for");
    // The client's own request for usage is passed on and answered.
    let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": []});
    let text = gw
        .post("/v1/chat/completions", ALICE, body)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("\"usage\""), "{text}");
    let sent = m["a"].requests()[1].json().unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    gw.stop().await;
}

/// R10.2: an Idempotency-Key goes on every same-target retry — also on the retries of a
/// target reached by a failover — and not on the failover itself.
#[tokio::test]
async fn idempotency_key_is_sent_on_a_retry_after_a_failover() {
    let mocks = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "resilience:\n  retry:\n    initial_backoff: 10ms\n    max_backoff: 20ms\nchannels:\n{}    auto_ban: false\n{}    auto_ban: false\n{CLIENTS}",
            ch("a", "openai", 10, ""),
            ch("b", "openai", 0, "")
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["a"].set_default(Behavior::Status {
        code: 429,
        body: None,
    });
    mocks["b"].push(Behavior::Status {
        code: 503,
        body: None,
    });
    let response = gw
        .http
        .post(format!("{}/v1/responses", gw.base))
        .bearer_auth(ALICE)
        .header("idempotency-key", "order-44")
        .json(&json!({"model": "m", "input": "hi"}))
        .send()
        .await
        .unwrap();
    let chain = route(&response);
    assert_eq!(response.status(), 200, "{chain}");
    assert!(chain.ends_with("->b->b"), "{chain}");
    // R10.2: every attempt at b carries b's own key, so b can
    // deduplicate its retry; the client's key stays with the first target.
    let requests_b = mocks["b"].requests();
    assert_eq!(
        requests_b[0].header("idempotency-key"),
        Some("order-44:b/m"),
        "the failover itself"
    );
    assert_eq!(
        requests_b[1].header("idempotency-key"),
        requests_b[0].header("idempotency-key"),
        "b's retry"
    );
    gw.stop().await;
}

/// R9.6: `stream_policy` applies to `/v1/responses` as to chat and messages.
#[tokio::test]
async fn stream_policy_applies_to_responses() {
    let (gw, m) = pair("openai", "    stream_policy: force_stream\n").await;
    let response = send(&gw, "/v1/responses", false).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(m["a"].requests()[0].json().unwrap()["stream"], true);
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        "chunk 0 chunk 1 chunk 2 "
    );
    gw.stop().await;

    let (gw, m) = pair("openai", "    stream_policy: force_non_stream\n").await;
    let response = send(&gw, "/v1/responses", true).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert_eq!(m["a"].requests()[0].json().unwrap()["stream"], false);
    assert!(text.starts_with("event: response.created\n"), "{text}");
    assert!(
        text.contains("\"delta\":\"chunk 0 chunk 1 chunk 2 \""),
        "{text}"
    );
    assert!(text.contains("event: response.completed\n"), "{text}");
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["completion_tokens"], 3);
    gw.stop().await;
}

/// Converters never panic: an assembled stream with a content block that is not an object,
/// a replayed answer whose tool calls are not objects — each gets an answer.
#[tokio::test]
async fn converters_survive_unexpected_json_shapes() {
    let (gw, m) = pair("anthropic", "    stream_policy: force_stream\n").await;
    let sse = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"x\",\"usage\":{\"input_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":\"text\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    m["a"].set_default(Behavior::Raw {
        content_type: "text/event-stream".into(),
        body: sse.into(),
    });
    let response = tokio::time::timeout(Duration::from_secs(10), send(&gw, "/v1/messages", false))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["id"], "x");
    gw.stop().await;

    let (gw, m) = pair("openai", "    stream_policy: force_non_stream\n").await;
    let answer = json!({"id": "y", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok", "tool_calls": ["oops", 3, {"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}
    ]});
    m["a"].set_default(Behavior::Raw {
        content_type: "application/json".into(),
        body: answer.to_string(),
    });
    let response = tokio::time::timeout(Duration::from_secs(10), gw.chat("m", true))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(
        text.contains("\"name\":\"f\"") && text.ends_with("data: [DONE]\n\n"),
        "{text}"
    );
    gw.stop().await;
}
