//! The events one upstream read completes reach the client in one write (R9.1): a stream the
//! upstream sent in one write arrives as one HTTP/1.1 chunk, not one per event — natively and
//! translated, for an OpenAI and an Anthropic client — and a stream sent one event per write
//! still arrives whole and in order.
use std::time::Duration;

use serde_json::Value;
use switchyard_mock::Wire;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::streams::*;
use crate::support::*;

/// POST `body` to `path` over a raw HTTP/1.1 connection; the body's chunks as the gateway
/// framed them (one chunk per write of the relay).
async fn chunks(gw: &Gw, path: &str, body: &Value) -> Vec<String> {
    let addr = gw.base.trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {ALICE}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.expect("write head");
    conn.write_all(body.as_bytes()).await.expect("write body");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut raw))
        .await
        .expect("the answer ends")
        .expect("read");
    let text = String::from_utf8(raw).expect("utf-8");
    let (head, mut rest) = text.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    let mut out = Vec::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.trim(), 16).expect("hex size");
        if size == 0 {
            return out;
        }
        out.push(after[..size].to_string());
        rest = &after[size + 2..];
    }
}

#[tokio::test]
async fn the_events_of_one_upstream_read_reach_the_client_in_one_write() {
    let one_write = Wire {
        coalesce: true,
        ..Wire::default()
    };
    for (kind, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/v1/messages"),
        ("anthropic", "/v1/chat/completions"), // translated
        ("openai", "/v1/messages"),            // translated
    ] {
        let (gw, m) = pair(kind, "").await;
        m["a"].set_default(
            Behavior::Stream {
                chunks: 20,
                delay: Duration::ZERO,
            }
            .with(one_write.clone()),
        );
        let got = chunks(&gw, path, &body_for(path, true)).await;
        let text = got.concat();
        // 20 content events (and the stream's opening and end) in at most a few writes:
        // one per upstream read, never one per event.
        assert!(
            got.len() <= 3,
            "{kind} {path}: {} writes for one upstream read: {got:?}",
            got.len()
        );
        let content = data_lines(&text)
            .iter()
            .filter(|d| d.contains("\"content\":\"") || d.contains("\"text_delta\""))
            .count();
        assert!(
            content >= 20,
            "{kind} {path}: {content} content events\n{text}"
        );
        let done = if path == "/v1/messages" {
            "message_stop"
        } else {
            "[DONE]"
        };
        assert!(text.contains(done), "{kind} {path}: no {done}\n{text}");
        assert!(!text.contains("stream_incomplete"), "{text}");
        gw.stop().await;
    }
}

#[tokio::test]
async fn a_stream_sent_one_event_per_write_arrives_whole_and_in_order() {
    for (kind, path) in [
        ("openai", "/v1/chat/completions"),
        ("anthropic", "/v1/chat/completions"), // translated
    ] {
        let (gw, m) = pair(kind, "").await;
        m["a"].set_default(Behavior::Stream {
            chunks: 12,
            delay: Duration::from_millis(5),
        });
        let got = chunks(&gw, path, &body_for(path, true)).await;
        let text = got.concat();
        let words = chat_contents(&text);
        assert_eq!(words.len(), 12, "{kind}: {text}");
        // The mock numbers its chunks: they arrive in the order sent.
        let mut sorted = words.clone();
        sorted.sort_by_key(|w| {
            w.chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u32>()
                .unwrap_or(0)
        });
        assert_eq!(words, sorted, "{kind}: {text}");
        assert!(text.contains("data: [DONE]"), "{kind}: {text}");
        assert!(
            got.len() >= 6,
            "{kind}: paced events came in {} writes",
            got.len()
        );
        gw.stop().await;
    }
}
