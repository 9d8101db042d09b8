//! The events one upstream read completes reach the client in one write (R9.1): a stream the
//! upstream sent in one write arrives as one HTTP/1.1 chunk, not one per event — natively and
//! translated, for an OpenAI and an Anthropic client — and a stream sent one event per write
//! still arrives whole and in order. The body ends with the stream's last event, without
//! waiting for the upstream's end of body, whose connection is still reused.
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

/// An upstream that sends a whole chat stream, `[DONE]` included, then holds its end of body
/// until released; the connection each request came on is recorded.
struct HeldEnd {
    url: String,
    /// The number of the connection each request arrived on.
    requests: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
    release: tokio::sync::mpsc::Sender<()>,
    /// Told each time an end of body has been written.
    ended: tokio::sync::mpsc::Receiver<()>,
}

const HELD_STREAM: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n\
data: [DONE]\n\n";

async fn held_end_upstream() -> HeldEnd {
    use std::sync::{Arc, Mutex};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (release, release_rx) = tokio::sync::mpsc::channel::<()>(8);
    let release_rx = Arc::new(tokio::sync::Mutex::new(release_rx));
    let (ended_tx, ended) = tokio::sync::mpsc::channel::<()>(8);
    let seen = requests.clone();
    tokio::spawn(async move {
        let mut number = 0;
        while let Ok((conn, _)) = listener.accept().await {
            number += 1;
            let (seen, release_rx, ended_tx) = (seen.clone(), release_rx.clone(), ended_tx.clone());
            tokio::spawn(serve_held(conn, number, seen, release_rx, ended_tx));
        }
    });
    HeldEnd {
        url,
        requests,
        release,
        ended,
    }
}

/// One connection of [`held_end_upstream`]: each request read whole, answered with
/// [`HELD_STREAM`] in one write, its end of body written once released.
async fn serve_held(
    mut conn: tokio::net::TcpStream,
    number: usize,
    seen: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
    release: std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<()>>>,
    ended: tokio::sync::mpsc::Sender<()>,
) {
    let mut buf = Vec::new();
    loop {
        // A request: its head, then as many body bytes as its content-length says.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("the gateway sends a content-length");
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + len);
        seen.lock().expect("lock").push(number);
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{HELD_STREAM}\r\n",
            HELD_STREAM.len()
        );
        if conn.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
        if release.lock().await.recv().await.is_none()
            || conn.write_all(b"0\r\n\r\n").await.is_err()
        {
            return;
        }
        let _ = ended.send(()).await;
    }
}

/// The client's body ends with the stream's last event (`[DONE]`), not when the upstream's
/// end of body arrives (R9.1, R9.4): a client gets its whole answer while the upstream still
/// holds its end. What the upstream sends after is read off, so its connection is reused
/// for the next request rather than closed. (One serving thread: each thread keeps its own
/// upstream pool, and the two client connections must meet the same one.)
#[tokio::test]
async fn the_body_ends_at_the_last_event_and_the_upstream_connection_is_reused() {
    let mut up = held_end_upstream().await;
    let yaml = format!(
        "{FAST}channels:\n  a:\n    kind: openai\n    base_url: {}\n    keys: [\"sk-up-a\"]\n    models: [m]\n{CLIENTS}",
        up.url
    );
    let gw = start_gw_on_one_thread(&yaml).await;
    for round in 0..2 {
        // The upstream has not ended its body: the client's answer is whole all the same.
        let got = chunks(
            &gw,
            "/v1/chat/completions",
            &body_for("/v1/chat/completions", true),
        )
        .await;
        let text = got.concat();
        assert_eq!(chat_contents(&text), ["Hello"], "round {round}: {text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "round {round}: {text}");
        assert!(!text.contains("stream_incomplete"), "round {round}: {text}");
        up.release.send(()).await.expect("release");
        tokio::time::timeout(Duration::from_secs(10), up.ended.recv())
            .await
            .expect("the upstream wrote its end");
        // The drain reads the end; give the connection a moment to return to the pool.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Each stream is logged complete, billed with the usage its chunk reported before
    // [DONE] (the relay stopped reading at [DONE], not before the usage).
    let rows = requests(&gw).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in &rows {
        assert_eq!(row["stream_outcome"], "complete", "{row}");
        assert_eq!(row["prompt_tokens"], 3, "{row}");
        assert_eq!(row["completion_tokens"], 1, "{row}");
        assert_eq!(row["usage_estimated"], false, "{row}");
    }
    let requests = up.requests.lock().expect("lock").clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        requests[0], requests[1],
        "the second stream came on a new upstream connection: the first was closed"
    );
    gw.stop().await;
}
