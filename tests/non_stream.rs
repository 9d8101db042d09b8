//! Non-stream answers as real providers send them (R9.5, R9.7, R10.2, R7.1): headers
//! only when generation is done, bodies that are not JSON, bodies too large to inspect, empty
//! 2xx answers, hidden-error codes, channels whose request cannot be built.
use crate::support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use support::streams::*;
use support::*;

/// Seed 001: the header gate is for streaming requests. A non-stream answer's headers come
/// when generation is done — later than `upstream_header` for a reasoning model — and the
/// request is governed by `non_stream_timeout` instead: not failed over, not paid twice.
#[tokio::test]
async fn non_stream_request_is_not_cut_by_the_header_gate() {
    for extra in ["", "    stream_policy: force_non_stream\n"] {
        let mocks = mocks(&["a", "b"]).await;
        let yaml = fill(
            &format!(
                "timeouts:\n  upstream_header: 300ms\nchannels:\n{}{}{CLIENTS}",
                ch("a", "openai", 10, extra),
                ch("b", "openai", 0, "")
            ),
            &mocks,
        );
        let gw = start_gw(&yaml).await;
        // Headers after 3 × 300 ms, when the whole answer is ready.
        mocks["a"].set_default("stream=3:300ms".parse().unwrap());
        let stream = !extra.is_empty();
        let response = gw.chat("m", stream).await;
        assert_eq!(response.status(), 200, "{extra}");
        assert_eq!(route(&response), "a", "{extra}");
        let text = response.text().await.unwrap();
        assert!(text.contains("chunk 2"), "{text}");
        assert_eq!(mocks["b"].calls(), 0, "{extra}");
        gw.stop().await;
    }
}

/// R9.7: the channel's `non_stream_timeout` runs from send to last byte, headers included.
#[tokio::test]
async fn non_stream_timeout_covers_the_wait_for_headers() {
    let (gw, m) = pair("openai", "    non_stream_timeout: 300ms\n").await;
    m["a"].set_default(Behavior::HangBeforeHeaders(Duration::from_secs(5)));
    let started = Instant::now();
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["attempts"][0]["error_class"], "body_timeout");
    gw.stop().await;
}

/// R9.7: a body that is not JSON (audio, files) streams through as it arrives.
#[tokio::test]
async fn audio_streams_through_before_the_upstream_finishes() {
    let mocks = mocks(&["a"]).await;
    let gw = start_gw(&fill(
        &format!(
            "channels:\n{}    paths: [/v1/audio/speech]\n{CLIENTS}",
            ch("a", "openai", 0, "")
        ),
        &mocks,
    ))
    .await;
    // Two pieces, 4 s apart.
    mocks["a"].set_default("stream=2:4s".parse().unwrap());
    let started = Instant::now();
    let response = gw
        .post(
            "/v1/audio/speech",
            ALICE,
            json!({"model": "m", "input": "hi", "voice": "x"}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "audio/mpeg");
    let mut body = response.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"ID3"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "first bytes after {:?}",
        started.elapsed()
    );
    let mut all = first.to_vec();
    while let Some(Ok(b)) = body.next().await {
        all.extend_from_slice(&b);
    }
    assert!(all.ends_with(b"mock-audio"), "{all:?}");
    gw.stop().await;
}

/// A JSON answer too large to inspect streams through to the client; "too large" is never a
/// failure replayed on another channel.
#[tokio::test]
async fn oversized_answer_is_streamed_not_replayed() {
    let (gw, m) = pair("openai", "").await;
    m["a"].set_default("pad=130MiB".parse().unwrap());
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a");
    let mut body = response.bytes_stream();
    let (mut n, mut tail) = (0usize, Vec::new());
    while let Some(Ok(b)) = body.next().await {
        n += b.len();
        tail.extend_from_slice(&b);
        if tail.len() > 4096 {
            tail.drain(..tail.len() - 4096);
        }
    }
    assert!(n > 130 << 20, "{n}");
    let tail = String::from_utf8_lossy(&tail);
    assert!(
        tail.trim_end().ends_with('}') && tail.contains("chunk 2"),
        "{tail}"
    );
    assert_eq!(m["b"].calls(), 0);
    gw.stop().await;
}

/// An answer that is empty by definition (204) is a success, not an empty-body failure.
#[tokio::test]
async fn no_content_is_a_success() {
    let (gw, m) = pair("openai", "").await;
    m["a"].set_default(Behavior::Status {
        code: 204,
        body: None,
    });
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 204);
    assert_eq!(route(&response), "a");
    assert_eq!(m["b"].calls(), 0);
    gw.stop().await;
}

/// R9.5: only an error status (400–599) embedded in a hidden error becomes the client's
/// status; `"code": 200` or `302` is a 502.
#[tokio::test]
async fn hidden_error_code_outside_error_range_is_502() {
    let mocks = mocks(&["a"]).await;
    let yaml = format!(
        "routing:\n  retry_times: 0\nchannels:\n{}    auto_ban: false\n{CLIENTS}",
        ch("a", "openai", 0, "")
    );
    let gw = start_gw(&fill(&yaml, &mocks)).await;
    for code in [200, 302] {
        mocks["a"].set_default(Behavior::HiddenError { code: Some(code) });
        for stream in [false, true] {
            let response = gw.chat("m", stream).await;
            // 502, or 503 once the breaker has opened on these failures.
            assert!(
                response.status().is_server_error(),
                "code {code} stream {stream}: {}",
                response.status()
            );
        }
    }
    gw.stop().await;
}

/// A channel whose key cannot be a header value cannot send: a `channel:invalid_key`
/// failure that fails over and disables the key (R7.1), never a 500.
#[tokio::test]
async fn unbuildable_key_fails_over_and_counts_for_auto_disable() {
    let mocks = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "channels:\n  a:\n    kind: openai\n    base_url: {{a}}\n    keys: [\"sk-bad\\x01key\"]\n    models: [m]\n    priority: 10\n{}{CLIENTS}",
            ch("b", "openai", 0, "")
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert_eq!(mocks["a"].calls(), 0);
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["attempts"][0]["error_class"], "channel_error");
    let (_, v) = gw.admin_get("/admin/channels").await;
    let channel_a = v["channels"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "a"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(channel_a["enabled"], false, "{v}");
    gw.stop().await;
}

/// A JSON answer cut short with a clean end of body (half an object, then the chunked
/// terminator) is a broken answer that fails over, not a 200 with half a document.
#[tokio::test]
async fn truncated_json_answer_fails_over() {
    let (gw, m) = pair("openai", "").await;
    m["a"].set_default(Behavior::EndWithoutTerminal { chunks: 3 });
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "chunk 0 chunk 1 chunk 2 "
    );
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["attempts"][0]["error_class"], "broken");
    gw.stop().await;
}
