//! End-to-end streaming tests (R9, R1.4, R8.5, R11 inputs): time gates, the commit point,
//! `stream_incomplete`, hidden errors, stream policies, usage, client disconnect.
#[path = "streaming/one_write.rs"]
mod one_write;
#[path = "streaming/resume_matrix.rs"]
mod resume_matrix;
#[path = "streaming/throughput_floor.rs"]
mod throughput_floor;
use crate::support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use support::streams::*;
use support::*;

#[tokio::test]
async fn first_byte_timeout_fails_over_and_client_sees_only_the_healthy_stream() {
    let (gw, m) = pair("openai", "").await;
    m["a"].set_default(Behavior::StallAfterHeaders(Duration::from_secs(3)));
    let started = Instant::now();
    let response = gw.chat("m", true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert_eq!(response.headers()["x-mock-name"], "b");
    let text = response.text().await.unwrap();
    assert!(
        text.contains("data: [DONE]") && !text.contains("error"),
        "{text}"
    );
    assert_eq!(
        text.matches("chatcmpl-mock").count(),
        5,
        "one stream only: {text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("outcome=\"first_byte_timeout\""),
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn header_timeout_fails_over() {
    let upstreams = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "timeouts:\n  upstream_header: 300ms\nchannels:\n{}{}{CLIENTS}",
            ch("a", "openai", 10, ""),
            ch("b", "openai", 0, "")
        ),
        &upstreams,
    );
    let gw = start_gw(&yaml).await;
    upstreams["a"].set_default(Behavior::HangBeforeHeaders(Duration::from_secs(3)));
    let started = Instant::now();
    // The header gate is for streaming requests (R9.2); non-stream ones: see
    // `non_stream_request_is_not_cut_by_the_header_gate`.
    let response = gw.chat("m", true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The request is logged when its stream ends: read it to the end first (the relay runs
    // on a serving thread of its own, so the log could otherwise be read before it is done).
    let text = response.text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["attempts"][0]["error_class"], "header_timeout");
    gw.stop().await;
}

#[tokio::test]
async fn upstream_keepalives_reset_the_first_byte_timer() {
    let (gw, m) = pair("openai", "").await;
    // 5 × 150 ms of comments: longer than first_byte (300 ms) in total, never silent for it.
    m["a"].set_default(Behavior::KeepaliveThenOk {
        keepalives: 5,
        interval: Duration::from_millis(150),
    });
    let response = gw.chat("m", true).await;
    assert_eq!(route(&response), "a");
    let text = response.text().await.unwrap();
    assert!(text.contains("data: [DONE]"), "{text}");
    assert_eq!(m["b"].calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn keepalives_reach_a_raw_client_during_silence() {
    for (kind, path, want) in [
        ("openai", "/v1/chat/completions", ": keepalive\n\n"),
        ("anthropic", "/v1/messages", "event: ping\n"),
    ] {
        let (gw, m) = pair(kind, "").await;
        m["a"].set_default(Behavior::Stream {
            chunks: 3,
            delay: Duration::from_millis(350),
        });
        let response = send(&gw, path, true).await;
        assert_eq!(response.status(), 200);
        let mut stream = response.bytes_stream();
        let mut text = String::new();
        while let Some(b) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&b.unwrap()));
        }
        assert!(text.matches(want).count() >= 3, "{path}: {text}");
        assert!(
            !text.contains("stream_incomplete") && !text.contains("\nid:"),
            "{text}"
        );
        gw.stop().await;
    }
}

#[tokio::test]
async fn early_end_and_hard_cut_close_with_stream_incomplete_and_never_retry() {
    let cases = [
        ("openai", "/v1/chat/completions"),
        ("openai", "/v1/responses"),
        ("anthropic", "/v1/messages"),
    ];
    for (kind, path) in cases {
        for fault in [
            Behavior::EndWithoutTerminal { chunks: 2 },
            Behavior::CutMidStream { after_chunks: 2 },
        ] {
            let (gw, m) = pair(kind, "").await;
            m["a"].set_default(fault.clone());
            let response = send(&gw, path, true).await;
            assert_eq!(response.status(), 200);
            let text = response.text().await.unwrap();
            let what = format!("{path} {fault:?}: {text}");
            assert!(text.contains("chunk 1"), "relayed up to the cut: {what}");
            assert!(text.contains("\"stream_incomplete\""), "{what}");
            let last = text.trim_end().rsplit("\n\n").next().unwrap().to_string();
            assert!(
                last.contains("stream_incomplete"),
                "the error is last: {what}"
            );
            match path {
                "/v1/chat/completions" => {
                    assert!(
                        !text.contains("[DONE]") && last.starts_with("data: {\"error\""),
                        "{what}"
                    )
                }
                "/v1/responses" => assert!(last.starts_with("event: error\n"), "{what}"),
                _ => {
                    assert!(last.starts_with("event: error\n"), "{what}");
                    let data: Value =
                        serde_json::from_str(last.split("data: ").nth(1).unwrap()).unwrap();
                    assert_eq!(data["type"], "error");
                    assert_eq!(data["error"]["type"], "api_error");
                }
            }
            // The first byte reached the client: the second channel is never tried (R9.3).
            assert_eq!(m["b"].calls(), 0, "{what}");
            let rows = requests(&gw).await;
            assert_eq!(rows[0]["stream_outcome"], "incomplete", "{what}");
            assert_eq!(rows[0]["chain"], "a");
            let metrics = gw.metrics().await;
            assert!(metrics.contains("outcome=\"incomplete\""), "{metrics}");
            gw.stop().await;
        }
    }
}

#[tokio::test]
async fn hidden_errors_fail_over_in_bodies_and_first_events() {
    for (kind, path, stream) in [
        ("openai", "/v1/chat/completions", false),
        ("openai", "/v1/chat/completions", true),
        ("anthropic", "/v1/messages", true),
    ] {
        let (gw, m) = pair(kind, "").await;
        m["a"].set_default(Behavior::HiddenError { code: Some(429) });
        let response = send(&gw, path, stream).await;
        assert_eq!(response.status(), 200, "{path} {stream}");
        assert_eq!(route(&response), "a->b");
        let text = response.text().await.unwrap();
        assert!(!text.contains("error"), "{text}");
        let rows = requests(&gw).await;
        assert_eq!(rows[0]["attempts"][0]["upstream_status"], 429, "{rows:?}");
        gw.stop().await;
    }
    // Alone, a hidden error without an embedded status answers 502.
    let upstreams = mocks(&["a"]).await;
    let gw = start_gw(&fill(
        &format!("channels:\n{}{CLIENTS}", ch("a", "openai", 0, "")),
        &upstreams,
    ))
    .await;
    upstreams["a"].set_default(Behavior::HiddenError { code: None });
    assert_eq!(gw.chat("m", false).await.status(), 502);
    gw.stop().await;
}

#[tokio::test]
async fn channel_non_stream_timeout_fails_over() {
    let (gw, m) = pair("openai", "    non_stream_timeout: 200ms\n").await;
    m["a"].set_default(Behavior::SlowBody {
        delay: Duration::from_secs(3),
    });
    let started = Instant::now();
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert!(started.elapsed() < Duration::from_secs(2));
    gw.stop().await;
}

#[tokio::test]
async fn client_disconnect_closes_upstream_and_records_estimated_usage() {
    let (gw, m) = pair("openai", "").await;
    m["a"].set_default(Behavior::Stream {
        chunks: 100,
        delay: Duration::from_millis(50),
    });
    let response = gw.chat("m", true).await;
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("chunk 3") {
        seen.push_str(&String::from_utf8_lossy(
            &stream.next().await.unwrap().unwrap(),
        ));
    }
    assert_eq!(m["a"].open_streams(), 1);
    drop(stream);
    let started = Instant::now();
    while m["a"].open_streams() > 0 && started.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(m["a"].open_streams(), 0, "upstream still open after 1 s");
    assert!(m["a"].disconnects() >= 1);
    // Let the relay task write its record.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rows = requests(&gw).await;
    let r0 = &rows[0];
    assert_eq!(r0["stream_outcome"], "client_cancel", "{r0}");
    assert_eq!(r0["usage_estimated"], true);
    assert!(r0["completion_tokens"].as_u64().unwrap() >= 4, "{r0}");
    assert!(r0["prompt_tokens"].as_u64().unwrap() > 0, "{r0}");
    gw.stop().await;
}

#[tokio::test]
async fn client_leaving_before_the_first_byte_cancels_upstream() {
    for (stream, fault) in [
        (true, Behavior::StallAfterHeaders(Duration::from_secs(5))),
        (
            false,
            Behavior::SlowBody {
                delay: Duration::from_secs(5),
            },
        ),
    ] {
        let (gw, m) = pair("openai", "").await;
        m["a"].set_default(fault);
        let quick = reqwest::Client::builder()
            .timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let sent = quick
            .post(format!("{}/v1/chat/completions", gw.base))
            .bearer_auth(ALICE)
            .json(&body_for("/v1/chat/completions", stream))
            .send()
            .await;
        assert!(sent.is_err(), "the client gave up");
        let started = Instant::now();
        while m["a"].disconnects() == 0 && started.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(m["a"].disconnects(), 1, "stream={stream}");
        assert_eq!(m["b"].calls(), 0);
        // The abandoned request is still in the request log (R12.1).
        let rows = requests(&gw).await;
        assert_eq!(rows[0]["final_status"], 499, "{rows:?}");
        assert_eq!(rows[0]["error_code"], "client_cancelled");
        gw.stop().await;
    }
}

/// R18.1: after the commit point an upstream that sends nothing for `stream_stall` has
/// stalled: the client's stream ends with `stream_incomplete` within the stall plus a second,
/// although the upstream keeps the socket open for ten minutes; keepalives reach the client
/// only while the upstream is alive. For every client format.
#[tokio::test]
async fn a_stall_after_the_first_tokens_ends_the_stream_within_stream_stall() {
    let upstreams = mocks(&["a"]).await;
    let yaml = fill(
        &format!(
            "timeouts:\n  keepalive: 200ms\n  stream_stall: 1s\nchannels:\n{}{CLIENTS}",
            ch("a", "openai", 0, "")
        ),
        &upstreams,
    );
    let gw = start_gw(&yaml).await;
    for path in ["/v1/chat/completions", "/v1/messages", "/v1/responses"] {
        upstreams["a"].set_default(Behavior::Stream {
            chunks: 3,
            delay: Duration::from_secs(600),
        });
        let t0 = Instant::now();
        let response = send(&gw, path, true).await;
        assert_eq!(response.status(), 200, "{path}");
        let text = response.text().await.unwrap();
        let took = t0.elapsed();
        assert!(took < Duration::from_millis(2500), "{path}: {took:?}");
        assert!(text.contains("chunk 0"), "{path}: {text}");
        assert!(!text.contains("chunk 1"), "{path}: {text}");
        assert!(
            text.contains("stream_incomplete") && text.contains("stalled"),
            "{path}: {text}"
        );
    }
    gw.stop().await;
}

/// R18.2 (stream resume): `a` (Anthropic) is cut after two content events; with
/// `resilience.stream_resume` on, `b` gets the request with the text so far as an assistant
/// prefill and its continuation is spliced in: the client receives one whole answer with one
/// terminal event, in its own format (Messages natively, Chat translated); both attempts
/// are billed and the log says `resumed`. Off, or with no target that takes a prefill, the
/// stream ends with `stream_incomplete` exactly as before.
#[tokio::test]
async fn a_cut_text_stream_is_resumed_on_the_next_target() {
    let on = "resilience:\n  stream_resume: {enabled: true, max: 1}\n";
    for (path, resume, b_kind, whole) in [
        ("/v1/messages", on, "anthropic", true),
        ("/v1/chat/completions", on, "anthropic", true),
        ("/v1/messages", "", "anthropic", false),
        ("/v1/messages", on, "openai", false),
    ] {
        let upstreams = mocks(&["a", "b"]).await;
        upstreams["b"].set_record(true);
        let yaml = fill(
            &format!(
                "{FAST}{resume}channels:\n{}{}{CLIENTS}",
                ch("a", "anthropic", 10, ""),
                ch("b", b_kind, 0, "")
            ),
            &upstreams,
        );
        let gw = start_gw(&yaml).await;
        upstreams["a"].push(Behavior::CutMidStream { after_chunks: 2 });
        let case = format!("{path} resume={} b={b_kind}", !resume.is_empty());
        let response = send(&gw, path, true).await;
        assert_eq!(response.status(), 200, "{case}");
        let text = response.text().await.unwrap();
        let terminals =
            text.matches("event: message_stop").count() + text.matches("data: [DONE]").count();
        if whole {
            assert!(!text.contains("stream_incomplete"), "{case}: {text}");
            assert_eq!(terminals, 1, "{case}: one terminal event: {text}");
            let body = text_of(path, &text);
            assert_eq!(
                body, "chunk 0 chunk 1 chunk 0 chunk 1 chunk 2 ",
                "{case}: {text}"
            );
            let sent = upstreams["b"]
                .requests()
                .last()
                .and_then(|q| q.json())
                .expect("b asked");
            let last = sent["messages"].as_array().and_then(|a| a.last()).cloned();
            let last = last.unwrap_or_default();
            assert_eq!(last["role"], "assistant", "{case}: {sent}");
            assert!(
                last.to_string().contains("chunk 0 chunk 1"),
                "{case}: {sent}"
            );
            let rows = requests(&gw).await;
            assert_eq!(rows[0]["stream_outcome"], "resumed", "{case}: {}", rows[0]);
            assert_eq!(rows[0]["chain"], "a->b", "{case}");
            assert!(
                rows[0]["completion_tokens"].as_u64().unwrap_or(0) > 3,
                "{case}: both attempts billed: {}",
                rows[0]
            );
        } else {
            assert!(text.contains("stream_incomplete"), "{case}: {text}");
            assert_eq!(terminals, 0, "{case}: {text}");
            assert_eq!(upstreams["b"].calls(), 0, "{case}");
        }
        gw.stop().await;
    }
}

/// R18.2: only text resumes — a stream cut inside a tool call ends with
/// `stream_incomplete`, and a stall after the first tokens is resumed like a cut.
#[tokio::test]
async fn only_text_resumes_and_a_stall_resumes_like_a_cut() {
    let upstreams = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "{FAST}  stream_stall: 1s\nresilience:\n  stream_resume: {{enabled: true, max: 1}}\nchannels:\n{}{}{CLIENTS}",
            ch("a", "anthropic", 10, ""),
            ch("b", "anthropic", 0, "")
        ),
        &upstreams,
    );
    let gw = start_gw(&yaml).await;
    let tool = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n",
    );
    upstreams["a"].push(Behavior::Raw {
        content_type: "text/event-stream".into(),
        body: tool.into(),
    });
    let text = send(&gw, "/v1/messages", true).await.text().await.unwrap();
    assert!(text.contains("stream_incomplete"), "{text}");
    assert_eq!(upstreams["b"].calls(), 0, "a tool call is never resumed");
    upstreams["a"].push(Behavior::Stream {
        chunks: 3,
        delay: Duration::from_secs(600),
    });
    let t0 = Instant::now();
    let text = send(&gw, "/v1/messages", true).await.text().await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(!text.contains("stream_incomplete"), "{text}");
    assert_eq!(
        text_of("/v1/messages", &text),
        "chunk 0 chunk 0 chunk 1 chunk 2 "
    );
    gw.stop().await;
}

/// R18.2: a next target that refuses the prefill (a model that takes no trailing
/// assistant turn) is skipped; with none left the client gets `stream_incomplete`, never the
/// prefill's error.
#[tokio::test]
async fn a_refused_prefill_ends_the_stream_as_incomplete_not_with_its_error() {
    let upstreams = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "{FAST}resilience:\n  stream_resume: {{enabled: true, max: 1}}\nchannels:\n{}{}{CLIENTS}",
            ch("a", "anthropic", 10, ""),
            ch("b", "anthropic", 0, "    prefill: true\n")
        ),
        &upstreams,
    );
    let gw = start_gw(&yaml).await;
    upstreams["a"].push(Behavior::CutMidStream { after_chunks: 1 });
    upstreams["b"].push(Behavior::Status {
        code: 400,
        body: Some(r#"{"type":"error","error":{"type":"invalid_request_error","message":"This model does not support assistant message prefill."}}"#.into()),
    });
    let text = send(&gw, "/v1/messages", true).await.text().await.unwrap();
    assert_eq!(upstreams["b"].calls(), 1, "the continuation was asked for");
    assert!(text.contains("stream_incomplete"), "{text}");
    assert!(!text.contains("prefill"), "{text}");
    gw.stop().await;
}

/// The text of a Messages or Chat stream as the client reads it.
fn text_of(path: &str, text: &str) -> String {
    text.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            if path == "/v1/messages" {
                v["delta"]["text"].as_str().map(str::to_string)
            } else {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            }
        })
        .collect()
}
