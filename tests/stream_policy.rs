//! End-to-end stream-policy and usage tests (R9.6, R8.5, R11 inputs): `force_stream`,
//! `force_non_stream`, and the `include_usage` asked for on the client's behalf.
use crate::support;

use serde_json::{json, Value};
use support::streams::*;
use support::*;

#[tokio::test]
async fn force_stream_assembles_one_json_answer() {
    for (kind, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/v1/messages"),
    ] {
        let (gw, m) = pair(kind, "    stream_policy: force_stream\n").await;
        let response = send(&gw, path, false).await;
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
        let body: Value = response.json().await.unwrap();
        let sent = m["a"].requests()[0].json().unwrap();
        assert_eq!(sent["stream"], true, "{path}");
        if kind == "openai" {
            assert_eq!(body["object"], "chat.completion");
            assert_eq!(
                body["choices"][0]["message"]["content"],
                "chunk 0 chunk 1 chunk 2 "
            );
            assert_eq!(body["choices"][0]["finish_reason"], "stop");
            assert_eq!(body["usage"]["completion_tokens"], 3);
        } else {
            assert_eq!(body["type"], "message");
            assert_eq!(body["content"][0]["text"], "chunk 0 chunk 1 chunk 2 ");
            assert_eq!(body["stop_reason"], "end_turn");
            assert_eq!(
                (
                    body["usage"]["input_tokens"].as_u64(),
                    body["usage"]["output_tokens"].as_u64()
                ),
                // As the upstream reported it (input excludes the cache counts).
                (Some(4), Some(3))
            );
        }
        let rows = requests(&gw).await;
        assert_eq!(
            (
                rows[0]["prompt_tokens"].as_u64(),
                rows[0]["completion_tokens"].as_u64()
            ),
            // Anthropic's input_tokens excludes its cache counts; the log counts all input.
            (Some(10), Some(3))
        );
        gw.stop().await;
    }
    // An assembled stream that breaks is an ordinary failed attempt: it fails over.
    let (gw, m) = pair("openai", "    stream_policy: force_stream\n").await;
    m["a"].set_default(Behavior::CutMidStream { after_chunks: 1 });
    let response = gw.chat("m", false).await;
    assert_eq!(route(&response), "a->b");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    gw.stop().await;
}

#[tokio::test]
async fn force_non_stream_replays_a_well_formed_stream() {
    for (kind, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/v1/messages"),
    ] {
        let (gw, m) = pair(kind, "    stream_policy: force_non_stream\n").await;
        let response = send(&gw, path, true).await;
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        let text = response.text().await.unwrap();
        let sent = m["a"].requests()[0].json().unwrap();
        assert_eq!(sent["stream"], false, "{path}");
        if kind == "openai" {
            assert!(
                text.contains("\"chat.completion.chunk\"")
                    && text.contains("chunk 0 chunk 1 chunk 2 "),
                "{text}"
            );
            assert!(text.contains("\"finish_reason\":\"stop\""), "{text}");
            assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
            assert!(!text.contains("\"usage\""), "not asked for: {text}");
        } else {
            let names: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("event: "))
                .collect();
            assert_eq!(
                names,
                [
                    "message_start",
                    "content_block_start",
                    "content_block_delta",
                    "content_block_stop",
                    "message_delta",
                    "message_stop"
                ],
                "{text}"
            );
        }
        gw.stop().await;
    }
}

#[tokio::test]
async fn include_usage_is_asked_for_hidden_from_the_client_and_recorded() {
    let (gw, m) = pair("openai", "").await;
    let response = gw.chat("m", true).await;
    let text = response.text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    assert!(
        !text.contains("\"usage\""),
        "the client did not ask for usage: {text}"
    );
    let sent = m["a"].requests()[0].json().unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    let rows = requests(&gw).await;
    let r0 = &rows[0];
    assert_eq!(
        (
            r0["prompt_tokens"].as_u64(),
            r0["completion_tokens"].as_u64(),
            r0["cached_tokens"].as_u64()
        ),
        (Some(10), Some(3), Some(4)),
        "{r0}"
    );
    assert_eq!(r0["usage_estimated"], false);
    assert_eq!(r0["stream_outcome"], "complete");
    // A client that asks sees the usage chunk.
    let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": []});
    let text = gw
        .post("/v1/chat/completions", ALICE, body)
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains("\"usage\""), "{text}");
    gw.stop().await;
}
