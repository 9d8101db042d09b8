//! Protocol abuse over raw TCP (R14.2, R14.5): slow headers, request-smuggling shapes,
//! header floods and the connection cap, checked by what a client on the wire observes.
use crate::support;

use std::time::{Duration, Instant};

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn gateway(limits: &str) -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a"]).await;
    let yaml = fill(
        &format!(
            "limits:\n{limits}channels:\n{}{CLIENTS}",
            channel("a", "{a}", 0, &["m"])
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

fn addr(gw: &Gw) -> String {
    gw.base.trim_start_matches("http://").to_string()
}

/// Write `req`, then read until the peer closes or `wait` passes.
async fn exchange(addr: &str, req: &[u8], wait: Duration) -> String {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let _ = socket.write_all(req).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, socket.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(resp: &str) -> Option<u16> {
    resp.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

const AUTH: &str = "authorization: Bearer sk-test-alice\r\ncontent-type: application/json\r\n";
const BODY: &str = r#"{"model":"m","messages":[]}"#;

/// R14.2: half a request line, then silence: the connection is cut by
/// `limits.header_read_timeout` (hyper closes it, optionally after a 408).
#[tokio::test]
async fn slow_headers_are_cut_by_the_header_read_timeout() {
    let (gw, m) = gateway("  header_read_timeout: 300ms\n").await;
    let mut socket = TcpStream::connect(addr(&gw)).await.unwrap();
    socket.write_all(b"POST /v1/chat/comp").await.unwrap();
    assert_cut_by_the_header_timeout(&mut socket, Duration::from_millis(300)).await;
    assert_eq!(m["a"].calls(), 0);
    gw.stop().await;
}

/// R14.2 on a kept-alive connection: the header-read timeout (1 s) runs from a head's
/// first byte, not from when the connection went idle. hyper's own timer ran from the end
/// of the last response, so a client that came back after an idle spell longer than the
/// timeout with its head in two reads was cut in the middle of it; a head that stalls is
/// still cut after the timeout, not left to the idle timeout (30 s).
#[tokio::test]
async fn a_slow_second_head_is_cut_by_the_header_read_timeout() {
    // 1 s, not less: the head's two writes 100 ms apart must stay well inside it on a
    // loaded machine.
    let timeout = Duration::from_secs(1);
    let idle = timeout + Duration::from_millis(300);
    let (gw, m) = gateway("  header_read_timeout: 1s\n  idle_timeout: 30s\n").await;
    let mut socket = TcpStream::connect(addr(&gw)).await.unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}content-length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    // Heads whole in one write, then one in two writes after an idle spell past the
    // timeout: all served on the one connection.
    for split in [None, None, Some(idle)] {
        match split {
            None => socket.write_all(request.as_bytes()).await.unwrap(),
            Some(idle) => {
                tokio::time::sleep(idle).await;
                let (a, b) = request.split_at(40);
                socket.write_all(a.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
                socket.write_all(b.as_bytes()).await.unwrap();
            }
        }
        let head = read_head(&mut socket).await;
        assert!(head.starts_with("HTTP/1.1 200"), "split {split:?}: {head}");
        let mut body = vec![0; content_length(&head)];
        socket.read_exact(&mut body).await.unwrap();
    }
    tokio::time::sleep(idle).await;
    socket.write_all(b"POST /v1/chat/comp").await.unwrap();
    assert_cut_by_the_header_timeout(&mut socket, timeout).await;
    assert_eq!(m["a"].calls(), 3);
    gw.stop().await;
}

/// The header-read `timeout` closes `socket` (optionally after a 408): not before two
/// thirds of it, within it and 1.7 s.
async fn assert_cut_by_the_header_timeout(socket: &mut TcpStream, timeout: Duration) {
    let started = Instant::now();
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "connection still open after 5 s");
    let took = started.elapsed();
    assert!(
        took < timeout + Duration::from_millis(1700),
        "closed after {took:?}"
    );
    assert!(took >= timeout * 2 / 3, "closed too early: {took:?}");
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
}

/// The response head (up to the blank line) from `socket`, byte by byte.
async fn read_head(socket: &mut TcpStream) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut byte))
            .await
            .expect("a response head within 5 s")
            .unwrap();
        assert_eq!(
            n,
            1,
            "closed inside a head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .expect("a content-length")
}

/// R14.5: smuggling shapes get 400 and never reach the upstream.
#[tokio::test]
async fn smuggling_shapes_get_400() {
    let (gw, m) = gateway("  header_read_timeout: 2s\n").await;
    let addr = addr(&gw);
    let body_len = BODY.len();
    let cases: Vec<(&str, String)> = vec![
        (
            "Content-Length: +3",
            format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}content-length: +{body_len}\r\n\r\n{BODY}"),
        ),
        (
            "Content-Length: -1",
            format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}content-length: -1\r\n\r\n{BODY}"),
        ),
        (
            "two different Content-Lengths",
            format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}content-length: {body_len}\r\ncontent-length: 3\r\n\r\n{BODY}"),
        ),
        (
            "oversized chunk size",
            format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}transfer-encoding: chunked\r\n\r\nffffffffffffffffff\r\n{BODY}\r\n0\r\n\r\n"),
        ),
        (
            "TE other than chunked",
            format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}transfer-encoding: gzip\r\n\r\n{BODY}"),
        ),
    ];
    for (what, req) in cases {
        let resp = exchange(&addr, req.as_bytes(), Duration::from_secs(3)).await;
        assert_eq!(status_of(&resp), Some(400), "{what}: {resp:?}");
    }
    assert_eq!(m["a"].calls(), 0, "a smuggled request reached the upstream");
    // A well-formed request on the same gateway works (the cases above were not vacuous).
    let ok = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}content-length: {body_len}\r\nconnection: close\r\n\r\n{BODY}");
    let resp = exchange(&addr, ok.as_bytes(), Duration::from_secs(5)).await;
    assert_eq!(status_of(&resp), Some(200), "{resp}");
    gw.stop().await;
}

/// R14.2: too many headers, or too many header bytes, is 431 (or a closed connection with
/// no request handled); the upstream is never called.
#[tokio::test]
async fn header_floods_get_431() {
    let (gw, m) = gateway("  header_read_timeout: 2s\n").await;
    let addr = addr(&gw);
    let mut many = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}");
    for i in 0..200 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str(&format!("content-length: {}\r\n\r\n{BODY}", BODY.len()));
    let resp = exchange(&addr, many.as_bytes(), Duration::from_secs(3)).await;
    assert_eq!(status_of(&resp), Some(431), "200 headers: {resp:?}");

    let mut big = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}");
    for i in 0..30 {
        big.push_str(&format!("x-big{i}: {}\r\n", "v".repeat(10 * 1024)));
    }
    big.push_str(&format!("content-length: {}\r\n\r\n{BODY}", BODY.len()));
    let resp = exchange(&addr, big.as_bytes(), Duration::from_secs(3)).await;
    assert_eq!(status_of(&resp), Some(431), "300 KB of headers: {resp:?}");
    assert_eq!(m["a"].calls(), 0);
    gw.stop().await;
}

/// R14.2: with `max_connections: 4`, the 5th concurrent connection gets a 503 at once; after
/// the 4 close, a new one is served again.
#[tokio::test]
async fn the_connection_cap_answers_503() {
    let (gw, _m) = gateway("  header_read_timeout: 10s\n  max_connections: 4\n").await;
    let addr = addr(&gw);
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut socket = TcpStream::connect(&addr).await.unwrap();
        socket.write_all(b"GET /v1/mod").await.unwrap(); // half a request: holds a permit
        held.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let resp = exchange(
        &addr,
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(status_of(&resp), Some(503), "{resp:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(resp.contains("overloaded_error"), "{resp}");
    drop(held);
    let mut served = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let response = exchange(
            &addr,
            b"GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-test-alice\r\nconnection: close\r\n\r\n",
            Duration::from_secs(3),
        )
        .await;
        if status_of(&response) == Some(200) {
            served = true;
            break;
        }
    }
    assert!(served, "permits were not returned");
    gw.stop().await;
}

/// R14.5, CL + TE together: refused with 400 and the connection closed (the framing guard in
/// `http::sniff` makes hyper reject the head), in either header order; bytes hidden behind
/// the chunked body (a second request that a Content-Length reader would see) are never
/// interpreted and no upstream is called.
#[tokio::test]
async fn cl_and_te_together_cannot_smuggle_a_second_request() {
    let (gw, m) = gateway("  header_read_timeout: 2s\n").await;
    let body_len = BODY.len();
    let smuggled = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}content-length: {body_len}\r\n\r\n{BODY}"
    );
    for (first, second) in [
        (
            format!("content-length: {}", body_len + 8),
            "transfer-encoding: chunked".to_string(),
        ),
        (
            "transfer-encoding: chunked".to_string(),
            format!("content-length: {}", body_len + 8),
        ),
    ] {
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n{AUTH}{first}\r\n{second}\r\n\r\n{body_len:x}\r\n{BODY}\r\n0\r\n\r\n{smuggled}"
        );
        let resp = exchange(&addr(&gw), req.as_bytes(), Duration::from_secs(3)).await;
        assert_eq!(resp.matches("HTTP/1.1 ").count(), 1, "{resp}");
        assert_eq!(status_of(&resp), Some(400), "{resp}");
        assert!(
            resp.to_ascii_lowercase().contains("connection: close"),
            "{resp}"
        );
    }
    assert_eq!(
        m["a"].calls(),
        0,
        "a refused or smuggled request reached the upstream"
    );
    gw.stop().await;
}
