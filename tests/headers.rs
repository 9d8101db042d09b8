//! Header hygiene both ways (B-header-hygiene; R14.3, R14.4): hop-by-hop headers a client
//! nominates in `Connection:` and `Expect` never go upstream, `OpenAI-Organization` /
//! `OpenAI-Project` only where the channel allows it; upstream account identifiers and
//! `Location` never reach clients; secrets in a channel's `headers` are scrubbed like keys.
use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

type Heads = Arc<Mutex<Vec<Vec<(String, String)>>>>;

const CHAT: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// An upstream that records every request head and answers like a provider whose answers
/// name its account: `openai-organization`, `anthropic-organization-id`, a `Location`, and a
/// header it nominates as hop-by-hop. A request whose model is `fail` gets a 401 whose body
/// quotes the `api-key` header it received (as Azure's errors quote keys).
async fn account_upstream() -> (String, Heads) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads: Heads = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(serve_one(s, seen));
        }
    });
    (format!("http://{addr}/v1"), heads)
}

async fn serve_one(socket: TcpStream, seen: Heads) {
    let mut reader = BufReader::new(socket);
    let mut head = Vec::new();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                len = v.parse().unwrap_or(0);
            }
            head.push((k, v));
        }
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body).await;
    let key = head
        .iter()
        .find(|(k, _)| k == "api-key")
        .map(|(_, v)| v.clone());
    seen.lock().unwrap().push(head);
    let (status, payload) = if String::from_utf8_lossy(&body).contains("\"fail\"") {
        let api_key = key.unwrap_or_default();
        (
            "401 Unauthorized",
            format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {api_key}","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
            ),
        )
    } else {
        ("200 OK", CHAT.to_string())
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nopenai-organization: org-operator-account\r\nopenai-project: proj_operator\r\nanthropic-organization-id: 5f1c-operator\r\nlocation: https://internal.upstream.example/v1/x\r\nconnection: close, x-upstream-hop\r\nx-upstream-hop: 1\r\nx-ratelimit-remaining-requests: 99\r\ncontent-length: {}\r\n\r\n{payload}",
        payload.len()
    );
    let mut socket = reader.into_inner();
    let _ = socket.write_all(resp.as_bytes()).await;
    let _ = socket.shutdown().await;
}

async fn gw_on(base: &str, extra: &str) -> Gw {
    let yaml = format!(
        "routing:\n  retry_times: 0\nauto_disable:\n  enabled: false\nchannels:\n  closed:\n    kind: openai\n    base_url: {base}\n    keys: [\"sk-up-closed\"]\n    models: [m, fail]\n  open:\n    kind: openai\n    base_url: {base}\n    keys: [\"sk-up-open\"]\n    models: [m-open]\n    forward_organization: true\n{extra}{CLIENTS}"
    );
    start_gw(&yaml).await
}

async fn raw_post(addr: &str, extra_headers: &str, body: &str) -> String {
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ALICE}\r\ncontent-type: application/json\r\n{extra_headers}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(addr).await.unwrap();
    socket.write_all(req.as_bytes()).await.unwrap();
    let mut out = vec![0u8; 64 * 1024];
    let mut got = Vec::new();
    // The gateway may wait for `100 Continue` to be read; read until the final answer.
    loop {
        let read = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut out))
            .await
            .unwrap()
            .unwrap();
        got.extend_from_slice(&out[..read]);
        let text = String::from_utf8_lossy(&got);
        if read == 0 || text.contains("\"object\":\"chat.completion\"") || text.contains("}}") {
            return text.into_owned();
        }
    }
}

fn has(head: &[(String, String)], name: &str) -> bool {
    head.iter().any(|(k, _)| k == name)
}

#[tokio::test]
async fn client_hop_by_hop_expect_and_account_selectors_stay_home() {
    let (base, heads) = account_upstream().await;
    let gw = gw_on(&base, "").await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let extra = "connection: keep-alive, X-Client-Hop\r\nx-client-hop: secret\r\nexpect: 100-continue\r\nopenai-organization: org-victim\r\nopenai-project: proj-victim\r\nx-keep: yes\r\n";
    let resp = raw_post(&addr, extra, r#"{"model":"m","messages":[]}"#).await;
    assert!(resp.contains("200 OK"), "{resp}");
    let resp = raw_post(&addr, extra, r#"{"model":"m-open","messages":[]}"#).await;
    assert!(resp.contains("200 OK"), "{resp}");
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    for (i, h) in heads.iter().enumerate() {
        assert!(
            !has(h, "x-client-hop"),
            "#{i}: a nominated hop-by-hop header went upstream: {h:?}"
        );
        assert!(!has(h, "expect"), "#{i}: Expect went upstream: {h:?}");
        assert!(has(h, "x-keep"), "#{i}: {h:?}");
    }
    assert!(
        !has(&heads[0], "openai-organization") && !has(&heads[0], "openai-project"),
        "{:?}",
        heads[0]
    );
    // The channel that allows it forwards the client's selectors.
    assert!(
        heads[1].contains(&("openai-organization".into(), "org-victim".into())),
        "{:?}",
        heads[1]
    );
    assert!(
        heads[1].contains(&("openai-project".into(), "proj-victim".into())),
        "{:?}",
        heads[1]
    );
    gw.stop().await;
}

#[tokio::test]
async fn upstream_account_identifiers_and_location_never_reach_clients() {
    let (base, _heads) = account_upstream().await;
    let gw = gw_on(&base, "").await;
    for model in ["m", "fail"] {
        let response = gw.chat(model, false).await;
        let headers = response.headers().clone();
        assert_eq!(
            response.status().as_u16(),
            if model == "m" { 200 } else { 401 }
        );
        for name in [
            "openai-organization",
            "openai-project",
            "anthropic-organization-id",
            "location",
            "x-upstream-hop",
        ] {
            assert!(
                !headers.contains_key(name),
                "{model}: {name} reached the client: {headers:?}"
            );
        }
        assert_eq!(headers["x-ratelimit-remaining-requests"], "99", "{model}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn channel_header_secrets_are_scrubbed_like_keys() {
    let (base, heads) = account_upstream().await;
    let canary = format!("azure-canary-{:016x}", fastrand::u64(..));
    let gw = gw_on(&base, &format!("  azure:\n    kind: openai\n    base_url: {base}\n    keys: []\n    models: [fail-az]\n    headers: {{api-key: \"{canary}\"}}\n")).await;
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            serde_json::json!({"model": "fail-az", "messages": [], "x": "fail"}),
        )
        .await;
    assert_eq!(response.status(), 401);
    let text = response.text().await.unwrap();
    assert!(text.contains("Incorrect API key provided: ***"), "{text}");
    assert!(
        !text.contains(&canary),
        "the header secret reached the client: {text}"
    );
    // It did go upstream (the scrub above was not vacuous).
    assert!(heads
        .lock()
        .unwrap()
        .iter()
        .any(|h| h.contains(&("api-key".into(), canary.clone()))));
    gw.flush().await;
    for p in [
        "/admin/channels",
        "/admin/requests",
        "/admin/explain?client=alice&model=fail-az",
    ] {
        let (_, v) = gw.admin_get(p).await;
        assert!(!v.to_string().contains(&canary), "{p}");
    }
    gw.stop().await;
}
