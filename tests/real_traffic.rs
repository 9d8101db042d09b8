//! Streams as real providers send them (R9.1–R9.4, R9.6): several events per read,
//! `Content-Length` framing, gzip, an Anthropic error after `message_start`, bytes that never
//! complete an event, the SSE headers front proxies need, the idle cut of a committed stream.
use crate::support;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;
use support::streams::*;
use support::*;

const PATHS: [(&str, &str, &str); 3] = [
    ("openai", "/v1/chat/completions", "data: [DONE]"),
    ("anthropic", "/v1/messages", "event: message_stop"),
    ("openai", "/v1/responses", "event: response.completed"),
];

/// A request with an `x-mock-fault` header (forwarded to the mock upstream).
pub async fn faulty(gw: &Gw, path: &str, stream: bool, fault: &str) -> reqwest::Response {
    gw.http
        .post(format!("{}{}", gw.base, path))
        .bearer_auth(ALICE)
        .header("x-mock-fault", fault)
        .json(&body_for(path, stream))
        .send()
        .await
        .expect("request sent")
}

/// R9.1/R9.4: a whole short answer in one read (coalesced segments, a `Content-Length` SSE
/// body, a gzip-encoded stream) reaches the client whole: every event, in order, and the
/// terminal event — never a spurious `stream_incomplete`.
#[tokio::test]
async fn every_event_of_a_coalesced_stream_is_relayed() {
    for (kind, path, terminal) in PATHS {
        let (gw, m) = pair(kind, "").await;
        let baseline = send(&gw, path, true).await.text().await.unwrap();
        assert!(baseline.contains(terminal), "{baseline}");
        for fault in [
            "ok,coalesce",
            "ok,cl",
            "ok,coalesce,cl",
            "ok,gzip",
            "ok,split=1",
        ] {
            let response = faulty(&gw, path, true, fault).await;
            assert_eq!(response.status(), 200, "{path} {fault}");
            assert_eq!(route(&response), "a", "{path} {fault}");
            let text = response.text().await.unwrap();
            assert_eq!(text, baseline, "{path} {fault}");
            assert!(
                !text.contains("stream_incomplete"),
                "{path} {fault}: {text}"
            );
        }
        assert_eq!(m["b"].calls(), 0);
        let rows = requests(&gw).await;
        assert!(
            rows.iter().all(|r| r["stream_outcome"] == "complete"),
            "{rows:?}"
        );
        gw.stop().await;
    }
}

/// R9.3: Anthropic reports an overload as `event: error` right after `message_start` and
/// `ping`; nothing has reached the client yet, so it fails over (Responses: an `error` event
/// after `response.created`).
#[tokio::test]
async fn error_after_the_preamble_fails_over() {
    for (kind, path, terminal) in &PATHS[1..] {
        let (gw, m) = pair(kind, "").await;
        m["a"].set_default("error_after_start=529".parse().unwrap());
        // `/v1/responses` is replayed only with an Idempotency-Key (R10.1).
        let response = gw
            .http
            .post(format!("{}{}", gw.base, path))
            .bearer_auth(ALICE)
            .header("idempotency-key", "turn-1")
            .json(&body_for(path, true))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(route(&response), "a->b", "{path}");
        assert_eq!(response.headers()["x-mock-name"], "b");
        let text = response.text().await.unwrap();
        assert!(text.contains(terminal), "{text}");
        assert!(
            !text.contains("error"),
            "only b's stream reaches the client: {text}"
        );
        let opening = if *kind == "anthropic" {
            "event: message_start"
        } else {
            "event: response.created"
        };
        assert_eq!(text.matches(opening).count(), 1, "{text}");
        let rows = requests(&gw).await;
        assert_eq!(rows[0]["attempts"][0]["error_class"], "http_5xx", "{path}");
        assert_eq!(m["a"].calls(), 1);
        gw.stop().await;
    }
}

/// R9.2: the first-byte gate counts complete events only; an upstream that trickles bytes
/// without ever completing one is a stuck stream and fails over within `first_byte`.
#[tokio::test]
async fn bytes_that_are_not_events_do_not_reset_the_first_byte_gate() {
    let (gw, m) = pair("openai", "").await;
    m["a"].set_default("drip=50ms".parse().unwrap());
    let started = Instant::now();
    let response = gw.chat("m", true).await;
    assert_eq!(route(&response), "a->b");
    assert!(response.text().await.unwrap().contains("data: [DONE]"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["attempts"][0]["error_class"], "first_byte_timeout");
    gw.stop().await;
}

/// A hostile upstream cannot grow the framer without bound: an event past the cap ends the
/// committed stream with `stream_incomplete` and nothing of it reaches the client.
#[tokio::test]
async fn an_endless_event_is_cut_not_buffered() {
    let (gw, _m) = pair("openai", "").await;
    let response = faulty(&gw, "/v1/chat/completions", true, "flood=40MiB").await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut got = Vec::new();
    while let Some(Ok(b)) = body.next().await {
        got.extend_from_slice(&b);
    }
    assert!(got.len() < 64 * 1024, "{} bytes relayed", got.len());
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("stream_incomplete"), "{text}");
    gw.stop().await;
}

/// Seed 001: switchyard's own SSE responses tell front proxies not to cache or buffer them —
/// relayed streams and streams replayed from a JSON answer alike.
#[tokio::test]
async fn sse_responses_carry_no_cache_and_no_buffering() {
    for extra in ["", "    stream_policy: force_non_stream\n"] {
        let (gw, _m) = pair("openai", extra).await;
        let response = gw.chat("m", true).await;
        assert_eq!(response.status(), 200);
        let headers = response.headers();
        assert!(headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        assert_eq!(headers["cache-control"], "no-cache", "{extra}");
        assert_eq!(headers["x-accel-buffering"], "no", "{extra}");
        gw.stop().await;
    }
}

/// Seed 001: a committed stream silent for the channel's `non_stream_timeout` is cut (not
/// only after the global one).
#[tokio::test]
async fn committed_stream_idle_cut_uses_the_channel_value() {
    let (gw, _m) = pair("openai", "    non_stream_timeout: 400ms\n").await;
    let started = Instant::now();
    let response = faulty(&gw, "/v1/chat/completions", true, "stream=4:3s").await;
    assert_eq!(route(&response), "a");
    let text = response.text().await.unwrap();
    assert!(text.contains("stream_incomplete"), "{text}");
    assert!(text.contains("went silent"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    gw.stop().await;
}

/// Upstream bodies are asked for uncompressed; one compressed anyway is decoded, inspected
/// and billed, and reaches the client plain.
#[tokio::test]
async fn gzip_answers_are_decoded_and_their_usage_read() {
    let (gw, m) = pair("openai", "").await;
    let response = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .header("accept-encoding", "gzip")
        .header("x-mock-fault", "ok,gzip")
        .json(&body_for("/v1/chat/completions", false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("content-encoding").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "chunk 0 chunk 1 chunk 2 "
    );
    assert_eq!(
        m["a"].requests()[0].header("accept-encoding"),
        Some("identity")
    );
    let rows = requests(&gw).await;
    assert_eq!(rows[0]["prompt_tokens"], 10, "{}", rows[0]);
    assert_eq!(rows[0]["completion_tokens"], 3);
    assert_eq!(rows[0]["usage_estimated"], false);
    gw.stop().await;
}

/// R9.5, R1.4: when every attempt's stream opened with an error event (a 200 whose preamble
/// is followed by Anthropic's `overloaded_error`, or an OpenAI `data: {"error":…}`), the
/// client gets that status and message in its own format — not a 503 claiming every channel
/// was disabled.
#[tokio::test]
async fn a_stream_error_on_every_attempt_reaches_the_client_with_its_status() {
    for (kind, path, fault, status, kind_name) in [
        (
            "anthropic",
            "/v1/messages",
            "error_after_start=529",
            529,
            "overloaded_error",
        ),
        (
            "openai",
            "/v1/chat/completions",
            "hidden=429",
            429,
            "rate_limit_error",
        ),
    ] {
        let (gw, m) = pair(kind, "").await;
        for n in ["a", "b"] {
            m[n].set_default(fault.parse().unwrap());
        }
        let response = faulty(&gw, path, true, fault).await;
        assert_eq!(response.status(), status, "{path}");
        // (429 is also retried on the last target, R4.5.)
        assert!(route(&response).starts_with("a->b"), "{path}");
        let body: Value = response.json().await.unwrap();
        let err = &body["error"];
        assert_eq!(err["type"], kind_name, "{path}: {body}");
        assert_ne!(err["code"], "no_channel_available", "{path}: {body}");
        assert!(
            err["message"].as_str().unwrap().contains("upstream b"),
            "{path}: {body}"
        );
        if kind == "anthropic" {
            assert_eq!(body["type"], "error", "Anthropic's shape: {body}");
        }
        gw.stop().await;
    }
}
