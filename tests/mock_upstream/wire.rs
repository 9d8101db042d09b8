//! The mock speaks like real providers (PROVIDERS.md): gzip when the request accepts it,
//! headers of a non-stream answer only when it is ready, Anthropic's usage convention and
//! preamble, an error after `message_start`, and wire shapes chosen per request.
use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockUpstream, Wire, CHAOS};

use super::{client, event_names, post, post_fault};

fn chat(stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "messages": []})
}

fn gunzip(bytes: &[u8]) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[tokio::test]
async fn json_answers_are_gzipped_when_the_request_accepts_it() {
    let mock = MockUpstream::start().await.unwrap();
    let plain = post(&mock, "chat/completions", chat(false)).await;
    assert!(plain.headers().get("content-encoding").is_none());
    let plain = plain.text().await.unwrap();
    let response = client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .header("accept-encoding", "gzip, br")
        .json(&chat(false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(gunzip(&response.bytes().await.unwrap()), plain);
    // Streams are not compressed unless asked for with the `gzip` modifier.
    let response = client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .header("accept-encoding", "gzip")
        .json(&chat(true))
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("content-encoding").is_none());
    let sse = response.text().await.unwrap();
    let response = post_fault(&mock, "chat/completions", chat(true), "gzip").await;
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(gunzip(&response.bytes().await.unwrap()), sse);
}

#[tokio::test]
async fn wire_shapes_keep_the_bytes() {
    let mock = MockUpstream::start().await.unwrap();
    for path in ["chat/completions", "messages", "responses"] {
        let body = super::valid(path, json!({"model": "m", "stream": true}));
        let want = post(&mock, path, body.clone()).await.text().await.unwrap();
        for fault in [
            "coalesce",
            "split=1",
            "split=5/2,gap=1ms",
            "ok,cl",
            "cl,split=3",
        ] {
            let response = post_fault(&mock, path, body.clone(), fault).await;
            if fault.contains("cl") {
                assert_eq!(
                    response.headers()["content-length"].to_str().unwrap(),
                    want.len().to_string()
                );
            }
            assert_eq!(response.text().await.unwrap(), want, "{path} {fault}");
        }
        let crlf = post_fault(&mock, path, body.clone(), "crlf")
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(crlf, want.replace('\n', "\r\n"), "{path}");
    }
}

#[tokio::test]
async fn non_stream_headers_come_when_the_answer_is_ready() {
    let mock = MockUpstream::start().await.unwrap();
    let started = Instant::now();
    let response = post_fault(&mock, "chat/completions", chat(false), "stream=3:200ms").await;
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
    assert!(response.text().await.unwrap().contains("chunk 2"));
    // A stream's headers come at once.
    let started = Instant::now();
    let response = post_fault(&mock, "chat/completions", chat(true), "stream=3:400ms").await;
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    assert!(response.text().await.unwrap().contains("[DONE]"));
}

#[tokio::test]
async fn anthropic_stream_preamble_and_error_after_start() {
    let mock = MockUpstream::start().await.unwrap();
    let body = json!({"model": "claude", "stream": true, "max_tokens": 5, "messages": []});
    let text = post(&mock, "messages", body.clone())
        .await
        .text()
        .await
        .unwrap();
    let names = event_names(&text);
    assert_eq!(
        &names[..3],
        ["message_start", "content_block_start", "ping"]
    );
    assert!(text.contains("\"cache_read_input_tokens\":4"), "{text}");
    assert!(text.contains("\"cache_creation_input_tokens\":2"), "{text}");
    let response = post_fault(&mock, "messages", body, "error_after_start=529").await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert_eq!(event_names(&text), ["message_start", "ping", "error"]);
    assert!(text.contains("overloaded_error"), "{text}");
}

#[test]
fn fault_lists_parse() {
    let wire_with = |f: fn(&mut Wire)| {
        let mut wire = Wire::default();
        f(&mut wire);
        wire
    };
    assert_eq!(
        "ok,coalesce".parse::<Behavior>().unwrap(),
        Behavior::Ok.with(wire_with(|w| w.coalesce = true))
    );
    assert_eq!(
        "cut=2, split=3/1, gap=2ms, cl, gzip"
            .parse::<Behavior>()
            .unwrap(),
        Behavior::CutMidStream { after_chunks: 2 }.with(wire_with(|w| {
            w.split = vec![3, 1];
            w.gap = Duration::from_millis(2);
            w.content_length = true;
            w.gzip = true;
        }))
    );
    assert_eq!(
        "flood=2MiB".parse::<Behavior>().unwrap(),
        Behavior::Flood { bytes: 2 << 20 }
    );
    for bad in ["ok,ok", "split=0", "split=", "pad=lots", ",", "gap=never"] {
        assert!(bad.parse::<Behavior>().is_err(), "{bad:?} parsed");
    }
    for f in CHAOS {
        assert!(f.parse::<Behavior>().is_ok(), "{f}");
    }
}

#[tokio::test]
async fn chaos_draws_a_fault_per_call() {
    let mock = MockUpstream::start().await.unwrap();
    mock.set_default(Behavior::Chaos);
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut statuses = std::collections::BTreeSet::new();
    for _ in 0..60 {
        let response = quick
            .post(format!("{}/chat/completions", mock.base_url()))
            .json(&chat(false))
            .send()
            .await;
        statuses.insert(response.map_or(0, |r| r.status().as_u16()));
    }
    assert!(
        statuses.contains(&200) && statuses.iter().any(|s| *s >= 429),
        "{statuses:?}"
    );
}
