//! Connections (R14.2): silent connections cannot hold slots. The first
//! request head must arrive within `limits.header_read_timeout` on HTTP/1 and HTTP/2 alike,
//! idle connections are closed after `limits.idle_timeout`, and
//! `limits.max_connections_per_ip` caps one address — shown over real sockets, and with the
//! real binary at `max_connections: 4`.
use crate::support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: length 0, type 4, flags 0, stream 0.
const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// What each silent socket sends before going quiet.
fn silent_openers() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("nothing", vec![]),
        ("half the h2 preface", PREFACE[..10].to_vec()),
        ("the h2 preface", PREFACE.to_vec()),
        ("the h2 preface and SETTINGS", [PREFACE, SETTINGS].concat()),
        ("half an HTTP/1 head", b"GET /v1/mod".to_vec()),
    ]
}

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

/// Time until the gateway closes a socket that sent `opener` and then nothing (None: still
/// open after `wait`).
async fn closed_after(addr: &str, opener: &[u8], wait: Duration) -> Option<Duration> {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(opener).await.unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    match tokio::time::timeout(wait, socket.read_to_end(&mut buf)).await {
        Ok(_) => Some(started.elapsed()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn silent_and_preface_only_connections_are_cut_by_the_header_read_timeout() {
    let (gw, m) = gateway("  header_read_timeout: 400ms\n").await;
    let addr = addr(&gw);
    let mut waits = Vec::new();
    for (what, opener) in silent_openers() {
        let addr = addr.clone();
        waits.push(tokio::spawn(async move {
            (
                what,
                closed_after(&addr, &opener, Duration::from_secs(5)).await,
            )
        }));
    }
    for w in waits {
        let (what, took) = w.await.unwrap();
        let took = took.unwrap_or_else(|| panic!("{what}: still open after 5 s"));
        assert!(
            took < Duration::from_secs(3),
            "{what}: closed after {took:?}"
        );
    }
    assert_eq!(m["a"].calls(), 0);
    gw.stop().await;
}

/// HTTP/2 client over a raw socket (prior knowledge): one request, then the connection
/// future resolves when the gateway closes the connection.
async fn h2_one_request(addr: &str, path: &str) -> (u16, tokio::task::JoinHandle<Instant>) {
    let io = TokioIo::new(TcpStream::connect(addr).await.unwrap());
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .unwrap();
    let done = tokio::spawn(async move {
        let _ = conn.await;
        Instant::now()
    });
    let req = http::Request::get(format!("http://x{path}"))
        .header("authorization", format!("Bearer {ALICE}"))
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    (status, done)
}

/// `limits.idle_timeout`: an HTTP/2 or keep-alive HTTP/1 connection with nothing in flight is
/// closed; a slow stream in flight for longer than the idle timeout is not cut.
#[tokio::test]
async fn idle_connections_are_closed_and_busy_ones_are_not() {
    let (gw, m) = gateway("  header_read_timeout: 10s\n  idle_timeout: 500ms\n").await;
    let addr = addr(&gw);
    let (status, done) = h2_one_request(&addr, "/v1/models").await;
    assert_eq!(status, 200);
    let started = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(4), done)
        .await
        .expect("idle h2 connection still open after 4 s")
        .unwrap();
    assert!(closed.duration_since(started) < Duration::from_secs(3));
    // HTTP/1 keep-alive: the same, well before the 10 s head timeout.
    let req =
        format!("GET /v1/models HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ALICE}\r\n\r\n");
    let took = closed_after(&addr, req.as_bytes(), Duration::from_secs(4)).await;
    assert!(took.is_some_and(|d| d < Duration::from_secs(3)), "{took:?}");
    // A stream that takes 1.5 s (three times the idle timeout) completes.
    m["a"].set_default(Behavior::Stream {
        chunks: 6,
        delay: Duration::from_millis(250),
    });
    let response = gw.chat("m", true).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("[DONE]"), "{text}");
    gw.stop().await;
}

/// `n` sockets that each send half a request head and then nothing: each holds a slot.
async fn hold(addr: &str, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket.write_all(b"GET /v1/mod").await.unwrap();
        held.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    held
}

/// What a new connection asking for `/v1/models` reads within 3 s.
async fn answer_to_a_new_connection(addr: &str) -> String {
    let mut socket = TcpStream::connect(addr).await.unwrap();
    let _ = socket
        .write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), socket.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Once `held` is dropped, a client is served again; then the gateway stops.
async fn served_once_released(gw: Gw, held: Vec<TcpStream>) {
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let response = gw
        .http
        .get(format!("{}/v1/models", gw.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    gw.stop().await;
}

/// The real binary with `args` before `serve`, on a config of `limits` and one channel to a
/// mock: the process and its client address (from its ready line).
/// The real binary, its client and admin addresses, and what it needs kept alive.
struct Bin {
    child: tokio::process::Child,
    listen: String,
    admin: String,
    _mocks: std::collections::HashMap<String, MockUpstream>,
    _dir: tempfile::TempDir,
}

async fn binary(args: &[&str], limits: &str) -> Bin {
    let mocks = mocks(&["a"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    let yaml = fill(
        &format!(
            "{limits}channels:\n{}{CLIENTS}",
            channel("a", "{a}", 0, &["m"])
        ),
        &mocks,
    );
    std::fs::write(&cfg, format!("{}{yaml}", head(dir.path()))).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .arg("--config")
        .arg(&cfg)
        .arg("serve")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(l)) = err.next_line().await {
            if l.contains("switchyard ready") {
                return l;
            }
        }
        String::new()
    })
    .await
    .expect("binary became ready");
    tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
    let addrs: Vec<String> = regex::Regex::new(r"127\.0\.0\.1:\d+")
        .unwrap()
        .find_iter(&ready)
        .map(|m| m.as_str().to_string())
        .collect();
    let [listen, admin] = <[String; 2]>::try_from(addrs).expect("listen and admin addresses");
    Bin {
        child,
        listen,
        admin,
        _mocks: mocks,
        _dir: dir,
    }
}

/// `limits.max_connections_per_ip`: one address cannot take more; others are still served.
#[tokio::test]
async fn one_address_cannot_hold_more_than_its_share() {
    let (gw, _m) = gateway("  header_read_timeout: 10s\n  max_connections_per_ip: 2\n").await;
    let addr = addr(&gw);
    let held = hold(&addr, 2).await;
    let text = answer_to_a_new_connection(&addr).await;
    assert!(text.starts_with("HTTP/1.1 429"), "{text}");
    served_once_released(gw, held).await;
}

/// The issue's demonstration with the real binary: `max_connections: 4`,
/// `header_read_timeout: 1s`, four silent or preface-only sockets; a real client is served
/// within a few seconds.
#[tokio::test]
async fn real_binary_serves_a_client_past_four_silent_sockets() {
    let limits = "limits:\n  max_connections: 4\n  header_read_timeout: 1s\n";
    let mut bin = binary(&[], limits).await;
    let listen = bin.listen.clone();
    let mut silent = Vec::new();
    for (_, opener) in silent_openers().into_iter().take(4) {
        let mut socket = TcpStream::connect(&listen).await.unwrap();
        socket.write_all(&opener).await.unwrap();
        silent.push(socket);
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let started = Instant::now();
    let mut served = None;
    while started.elapsed() < Duration::from_secs(6) {
        let response = http
            .post(format!("http://{listen}/v1/chat/completions"))
            .bearer_auth(ALICE)
            .json(
                &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            )
            .send()
            .await;
        if response.is_ok_and(|r| r.status() == 200) {
            served = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = served.expect("no client served within 6 s while four silent sockets were open");
    assert!(took < Duration::from_secs(4), "served after {took:?}");
    drop(silent);
    let _ = bin.child.kill().await;
}

/// The connection caps are the gateway's, not each serving thread's (`http::cores`): the
/// in-process gateway serves on two threads that accept from one socket, so with
/// `max_connections: 4` and four held sockets, a fifth is refused at once (503) whichever
/// thread accepts it — per-thread caps would let it in and hold it.
#[tokio::test]
async fn the_connection_cap_is_shared_by_the_serving_threads() {
    let (gw, _m) = gateway("  header_read_timeout: 10s\n  max_connections: 4\n").await;
    let addr = addr(&gw);
    let held = hold(&addr, 4).await;
    for _ in 0..3 {
        let text = answer_to_a_new_connection(&addr).await;
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    }
    served_once_released(gw, held).await;
}

/// `--workers N`: the real binary serves on N threads of its own (named
/// `switchyard-serve-<i>`), and answers over many connections spread across them.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_binary_serves_on_the_threads_workers_asks_for() {
    let mut bin = binary(&["--workers", "3"], "").await;
    let listen = bin.listen.clone();
    let pid = bin.child.id().expect("pid");
    // The serving threads start just after the ready line: look for them for a while.
    let serving = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|n| n.trim() == "switchyard-serv")
                    .count()
            })
            .unwrap_or(0)
    };
    let started = Instant::now();
    while serving() < 3 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(serving(), 3, "serving threads (comm `switchyard-serv`)");
    // Sixteen connections at once, each its own client: every one is answered.
    let calls = (0..16).map(|i| {
        let url = format!("http://{listen}/v1/chat/completions");
        async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": format!("hi {i}")}]});
            let r = http.post(url).bearer_auth(ALICE).json(&body).send().await;
            r.map(|r| r.status().as_u16()).unwrap_or(0)
        }
    });
    let codes = futures_util::future::join_all(calls).await;
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
    let _ = bin.child.kill().await;
}

/// The open connections on each serving thread, from the admin's `/metrics`.
async fn per_thread(admin: &str) -> Vec<f64> {
    let text = reqwest::get(format!("http://{admin}/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .unwrap_or_default();
    let mut per: Vec<(usize, f64)> = text
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("switchyard_serving_thread_connections{thread=\"")?;
            let (thread, value) = rest.split_once("\"} ")?;
            Some((thread.parse().ok()?, value.trim().parse().ok()?))
        })
        .collect();
    per.sort_by_key(|(t, _)| *t);
    per.into_iter().map(|(_, v)| v).collect()
}

/// One keep-alive HTTP/1.1 request on `socket`: the status line of its answer.
async fn ask(socket: &mut TcpStream) -> String {
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ALICE}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The mock's answer is short and has a content-length: read until it is all here.
    while !complete(&got) {
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf))
            .await
            .expect("answered in time")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// A whole HTTP/1.1 answer with a content-length is in `got`.
fn complete(got: &[u8]) -> bool {
    let text = String::from_utf8_lossy(got);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let len = head.lines().find_map(|l| {
        let l = l.to_ascii_lowercase();
        l.strip_prefix("content-length:")?
            .trim()
            .parse::<usize>()
            .ok()
    });
    len.is_some_and(|n| body.len() >= n)
}

/// Connections that arrive together are spread over the serving threads (`http::spread`):
/// twelve sockets connected at once wait in the listener's queue, the first thread awake
/// accepts them all, and without the spread it serves all twelve for their keep-alive lives
/// on one core. Each thread ends with its share (within two), every connection is
/// answered on the thread it was dealt to, and the counts fall back to 0 when they close.
#[tokio::test]
async fn connections_that_arrive_together_are_spread_over_the_serving_threads() {
    let mut bin = binary(&["--workers", "3"], "").await;
    let (listen, admin) = (bin.listen.clone(), bin.admin.clone());
    let started = Instant::now();
    while per_thread(&admin).await.len() < 3 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let connects = (0..12).map(|_| TcpStream::connect(&listen));
    let mut sockets: Vec<TcpStream> = futures_util::future::join_all(connects)
        .await
        .into_iter()
        .map(|s| s.expect("connected"))
        .collect();
    for s in &mut sockets {
        let status = ask(s).await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    }
    let per = per_thread(&admin).await;
    assert_eq!(per.len(), 3, "one series per serving thread: {per:?}");
    assert_eq!(per.iter().sum::<f64>(), 12.0, "{per:?}");
    let (lo, hi) = per
        .iter()
        .fold((f64::MAX, 0f64), |(l, h), &v| (l.min(v), h.max(v)));
    assert!(hi - lo <= 2.0, "connections per thread: {per:?}");
    // Each connection keeps its thread: a second request on every one is answered.
    for s in &mut sockets {
        let status = ask(s).await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    }
    drop(sockets);
    let started = Instant::now();
    while per_thread(&admin).await.iter().sum::<f64>() > 0.0
        && started.elapsed() < Duration::from_secs(5)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        per_thread(&admin).await,
        vec![0.0; 3],
        "closed connections leave no count"
    );
    let _ = bin.child.kill().await;
}
