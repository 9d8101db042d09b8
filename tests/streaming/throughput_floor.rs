//! `timeouts.min_tokens_per_second` (R9.2, R4.4; issue 32): a stream whose first tokens come
//! slower than the floor fails over before its commit point, like a first-byte timeout.

use std::time::{Duration, Instant};

use super::support::streams::*;
use super::support::*;

/// `a` (tried first) and `b`, of `kind`, with the floor at `floor` tokens per second.
async fn floored(kind: &str, floor: &str) -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "timeouts:\n  first_byte: 2s\n  min_tokens_per_second: {floor}\nchannels:\n{}{}{CLIENTS}",
            ch("a", kind, 10, ""),
            ch("b", kind, 0, "")
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

/// Four content events a second, each within `first_byte`.
fn trickle() -> Behavior {
    Behavior::Stream {
        chunks: 12,
        delay: Duration::from_millis(250),
    }
}

#[tokio::test]
async fn a_stream_below_the_floor_fails_over_before_its_commit_point() {
    for (kind, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/v1/messages"),
    ] {
        let (gw, m) = floored(kind, "10").await;
        m["a"].set_default(trickle());
        let started = Instant::now();
        let response = send(&gw, path, true).await;
        assert_eq!(response.status(), 200);
        assert_eq!(route(&response), "a->b", "{path}");
        assert_eq!(response.headers()["x-mock-name"], "b");
        let text = response.text().await.unwrap();
        // Ten tokens were due within one second: the trickle is cut there, nothing of it
        // relayed, and the fallback's whole answer is the client's.
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        assert!(!text.contains("chunk 5"), "{path}: {text}");
        assert!(!text.contains("stream_incomplete"), "{path}: {text}");
        let rows = requests(&gw).await;
        assert_eq!(rows[0]["attempts"][0]["error_class"], "first_byte_timeout");
        assert!(gw.metrics().await.contains("below_min_tokens_per_second"));
        gw.stop().await;
    }
}

#[tokio::test]
async fn without_the_floor_or_above_it_the_slow_stream_is_served() {
    // 0 (the default) is off; 2 tokens a second is below the trickle's four.
    for floor in ["0", "2"] {
        let (gw, m) = floored("openai", floor).await;
        m["a"].set_default(trickle());
        let response = send(&gw, "/v1/chat/completions", true).await;
        assert_eq!(route(&response), "a", "floor {floor}");
        let text = response.text().await.unwrap();
        assert!(
            text.contains("chunk 11") && text.contains("[DONE]"),
            "{text}"
        );
        assert_eq!(m["b"].calls(), 0, "floor {floor}");
        gw.stop().await;
    }
    // A stream that ends within the window is committed at its terminal event.
    let (gw, m) = floored("openai", "50").await;
    let response = send(&gw, "/v1/chat/completions", true).await;
    assert_eq!(route(&response), "a");
    assert!(response.text().await.unwrap().contains("[DONE]"));
    assert_eq!(m["b"].calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn the_floor_is_validated() {
    for bad in ["-1", "nope"] {
        let yaml = format!("timeouts:\n  min_tokens_per_second: {bad}\n{CLIENTS}");
        let refusal = try_start_gw(&yaml).await.err().expect("refused");
        assert!(
            refusal.contains("timeouts.min_tokens_per_second"),
            "{refusal}"
        );
    }
}

/// Crossing: the floor on a translated stream. An OpenAI client on `anthropic` channels
/// (the stream translated Messages → Chat): the slow trickle fails over before its commit
/// point, nothing of it reaches the client, and the fallback's translated answer does.
#[tokio::test]
async fn a_translated_stream_below_the_floor_fails_over_before_its_commit_point() {
    let (gw, m) = floored("anthropic", "10").await;
    m["a"].set_default(trickle());
    let response = send(&gw, "/v1/chat/completions", true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert_eq!(response.headers()["x-mock-name"], "b");
    let text = response.text().await.unwrap();
    assert!(text.contains("chat.completion.chunk"), "translated: {text}");
    assert!(text.contains("[DONE]"), "{text}");
    assert!(!text.contains("stream_incomplete"), "{text}");
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["attempts"][0]["error_class"], "first_byte_timeout");
    assert!(m["a"].requests()[0].path.contains("/v1/messages"));
    gw.stop().await;
}
