//! Rate limits end to end over real sockets (R15.1–R15.3): client rpm under a
//! burst in both wire formats, token reserve and reconcile, concurrency held by a stream and
//! released by a client disconnect, an upstream 429 that cools one key only, and the request
//! body's read deadline (a trickle is cut with 408).
#[path = "limits/keyed.rs"]
mod keyed;
use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::*;

/// Client `name` (key `ALICE`; a name per test, as metrics are process-wide) with `limits`
/// (a YAML flow mapping) in front of one OpenAI and one Anthropic channel on mock `a`.
async fn gw_with(
    name: &str,
    limits: &str,
) -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a"]).await;
    let yaml = fill(
        &format!(
            "channels:\n  oa:\n    kind: openai\n    base_url: {{a}}\n    keys: [k1]\n    models: [m]\n  an:\n    kind: anthropic\n    base_url: {{a}}\n    keys: [k2]\n    models: [claude-x]\nclients:\n  {name}:\n    key: {ALICE}\n    limits: {limits}\n"
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// R15.1: rpm 10 admits exactly 10 of 40 concurrent requests; the others get 429 with
/// OpenAI's headers and error shape, never reach the upstream and are logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpm_10_admits_exactly_10_of_40_concurrent_requests() {
    let (gw, m) = gw_with("burst", "{rpm: 10}").await;
    let gw = std::sync::Arc::new(gw);
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let gw = gw.clone();
        tasks.push(tokio::spawn(async move {
            let response = gw.chat("m", false).await;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            (status, headers, body)
        }));
    }
    let mut ok = 0;
    let mut limited = Vec::new();
    for t in tasks {
        let (status, h, body) = t.await.unwrap();
        match status {
            200 => ok += 1,
            429 => limited.push((h, body)),
            s => panic!("unexpected status {s}: {body}"),
        }
    }
    assert_eq!(ok, 10, "exactly the limit");
    assert_eq!(limited.len(), 30);
    assert_eq!(
        m["a"].requests().len(),
        10,
        "a refused request never reaches upstream"
    );
    for (h, body) in &limited {
        let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
        let secs: u64 = get("retry-after").parse().expect("retry-after in seconds");
        assert!((1..=61).contains(&secs), "retry-after {secs}");
        let ms: u64 = get("retry-after-ms").parse().expect("retry-after-ms");
        assert!(ms > 0 && ms <= secs * 1000, "{ms} vs {secs}");
        assert_eq!(get("x-ratelimit-limit-requests"), "10");
        assert_eq!(get("x-ratelimit-remaining-requests"), "0");
        let reset = get("x-ratelimit-reset-requests");
        assert!(
            reset.ends_with('s') && reset.len() >= 2,
            "Go duration: {reset:?}"
        );
        assert!(h.get("anthropic-ratelimit-requests-limit").is_none());
        assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
        assert_eq!(body["error"]["type"], "requests", "{body}");
        let msg = body["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains("10 requests per minute"), "{msg}");
    }
    let gw = std::sync::Arc::try_unwrap(gw).ok().expect("all tasks done");
    gw.flush().await;
    let (_, v) = gw.admin_get("/admin/requests?limit=100").await;
    let rows = v["requests"].as_array().cloned().unwrap_or_default();
    let refused = rows.iter().filter(|r| r["final_status"] == 429).count();
    assert_eq!(refused, 30, "every refusal is in the request log");
    let row = rows.iter().find(|r| r["final_status"] == 429).unwrap();
    assert_eq!(row["error_code"], "rate_limit_exceeded", "{row}");
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains(r#"switchyard_rate_limited_total{client="burst",kind="rpm"} 30"#),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("rate_limited"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (s, v) = gw.admin_get("/admin/clients/burst").await;
    assert_eq!(s, 200);
    assert_eq!(v["limits"]["rpm"]["limit"], 10, "{v}");
    assert_eq!(v["limits"]["rpm"]["used"], 10, "{v}");
    assert_eq!(v["limits"]["rpm"]["remaining"], 0, "{v}");
    gw.stop().await;
}

/// The same refusal on `/v1/messages`: Anthropic's error shape and its header names.
#[tokio::test]
async fn anthropic_callers_get_rate_limit_error_and_anthropic_headers() {
    let (gw, m) = gw_with("anth", "{rpm: 2, tpm: 100000}").await;
    let body = json!({"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..2 {
        let response = gw.post("/v1/messages", ALICE, body.clone()).await;
        assert_eq!(response.status(), 200);
    }
    let response = gw.post("/v1/messages", ALICE, body.clone()).await;
    assert_eq!(response.status(), 429);
    assert_eq!(
        header(&response, "anthropic-ratelimit-requests-limit"),
        Some("2")
    );
    assert_eq!(
        header(&response, "anthropic-ratelimit-requests-remaining"),
        Some("0")
    );
    let reset = header(&response, "anthropic-ratelimit-requests-reset").unwrap_or("");
    assert!(
        reset.ends_with('Z') && reset.contains('T'),
        "RFC 3339: {reset}"
    );
    assert_eq!(
        header(&response, "anthropic-ratelimit-tokens-limit"),
        Some("100000")
    );
    assert!(header(&response, "retry-after").is_some());
    assert!(header(&response, "x-ratelimit-limit-requests").is_none());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    assert_eq!(m["a"].requests().len(), 2);
    gw.stop().await;
}

/// Tokens: a request reserves prompt estimate + max_tokens and is reconciled to what the
/// upstream reports, so a second such request fits; one that can never fit says so.
#[tokio::test]
async fn tpm_reserves_the_estimate_and_reconciles_to_usage() {
    let (gw, m) = gw_with("tok", "{tpm: 2000}").await;
    let ask = |max: u64| json!({"model": "m", "max_tokens": max, "messages": [{"role": "user", "content": "hi"}]});
    // Reserves ~1500 of 2000; the mock uses a few dozen, so after settle there is room.
    let response = gw.post("/v1/chat/completions", ALICE, ask(1500)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-ratelimit-limit-tokens"),
        None,
        "no headers on success"
    );
    let response = gw.post("/v1/chat/completions", ALICE, ask(1500)).await;
    assert_eq!(
        response.status(),
        200,
        "the first reservation was reconciled to its usage"
    );
    // A request whose reservation alone exceeds the limit can never be admitted.
    let response = gw.post("/v1/chat/completions", ALICE, ask(5000)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "x-should-retry"), Some("false"));
    assert_eq!(header(&response, "retry-after"), None);
    assert_eq!(header(&response, "x-ratelimit-limit-tokens"), Some("2000"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "tokens", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("can never be admitted"),
        "{body}"
    );
    assert_eq!(m["a"].requests().len(), 2);
    // Used tokens are the settled usage, not the reservations.
    let (_, c) = gw.admin_get("/admin/clients/tok").await;
    let used = c["limits"]["tpm"]["used"].as_u64().unwrap();
    assert!(used > 0 && used < 200, "settled to usage: {c}");
    gw.stop().await;
}

/// Concurrency 1: a long stream holds the permit to its end; the client dropping it
/// mid-stream releases it.
#[tokio::test]
async fn concurrency_is_held_by_a_stream_and_released_by_a_disconnect() {
    let (gw, m) = gw_with("conc", "{concurrency: 1}").await;
    m["a"].push(Behavior::Stream {
        chunks: 200,
        delay: Duration::from_millis(50),
    });
    let mut first = gw.chat("m", true).await;
    assert_eq!(first.status(), 200);
    let chunk = first.chunk().await.unwrap();
    assert!(chunk.is_some(), "the stream started");
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 429, "the stream holds the only permit");
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("concurrency"));
    let (_, c) = gw.admin_get("/admin/clients/conc").await;
    assert_eq!(c["limits"]["concurrency"]["used"], 1, "{c}");
    drop(first);
    let mut ok = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if gw.chat("m", false).await.status() == 200 {
            ok = true;
            break;
        }
    }
    assert!(ok, "the disconnect released the permit");
    gw.stop().await;
}

/// R15.3: an upstream 429 with `Retry-After: 2` cools only that key for ~2 s while the
/// channel's other key serves; the cooled key is not attempted during the window, and is
/// used again after it.
#[tokio::test]
async fn an_upstream_429_cools_only_that_key() {
    let up = keyed::KeyedUpstream::start(&["k-bad"]).await;
    let yaml = format!(
        "resilience:\n  retry:\n    initial_backoff: 1ms\n    max_backoff: 2ms\nchannels:\n  c:\n    kind: openai\n    base_url: {}\n    keys: [k-bad, k-good]\n    models: [m]\n    auto_ban: false\n{CLIENTS}",
        up.base_url()
    );
    let gw = start_gw(&yaml).await;
    let t0 = std::time::Instant::now();
    for i in 0..8 {
        let response = gw.chat("m", false).await;
        assert_eq!(response.status(), 200, "request {i}");
    }
    // Eight local requests take milliseconds; none waited for the cooling key.
    assert!(
        t0.elapsed() < Duration::from_millis(1800),
        "{:?}",
        t0.elapsed()
    );
    let bad = up.hits("k-bad");
    assert_eq!(
        bad, 1,
        "k-bad is attempted once, then held back while it cools"
    );
    assert!(up.hits("k-good") >= 8);
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains(
            r#"switchyard_upstream_key_cooldowns_total{channel="c",source="retry-after"} 1"#
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("cooldowns"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // After the window the key is walked again (and cools again).
    tokio::time::sleep(Duration::from_millis(2300).saturating_sub(t0.elapsed())).await;
    for _ in 0..4 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    assert!(
        up.hits("k-bad") > bad,
        "k-bad is tried again after its reset"
    );
    gw.stop().await;
}

/// Config: nonsense is rejected with the key; group defaults apply field by field.
#[tokio::test]
async fn config_rejects_negative_limits_and_merges_group_defaults() {
    let yaml = "channels:\n  c:\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n    limits: {rpm: -1}\ngroups:\n  default:\n    limits: {rpm: 5, tpm: 900}\nclients:\n  alice:\n    key: k\n    limits: {rpm: 7}\nrouting:\n  balance: sideways\n";
    let error =
        switchyard::config::load_str(yaml, std::path::Path::new("t.yaml"), &Default::default())
            .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("t.yaml:5: channels.c.limits.rpm: must not be negative"),
        "{text}"
    );
    assert!(text.contains("routing.balance"), "{text}");
    let ok = yaml
        .replace("{rpm: -1}", "{rpm: 3}")
        .replace("sideways", "capacity");
    let cfg =
        switchyard::config::load_str(&ok, std::path::Path::new("t.yaml"), &Default::default())
            .unwrap();
    let limits = cfg.clients[0].limits;
    assert_eq!(
        (limits.rpm, limits.tpm, limits.rpd, limits.concurrency),
        (7, 900, 0, 0)
    );
    assert_eq!(cfg.channels[0].limits.rpm, 3);
    // A `groups` entry no channel declares is a typo: its clients would run unlimited.
    let ghost = ok.replace("  default:\n    limits", "  defualt:\n    limits");
    let error =
        switchyard::config::load_str(&ghost, std::path::Path::new("t.yaml"), &Default::default())
            .unwrap_err();
    assert!(
        error.to_string().contains("groups.defualt: no channel"),
        "{error}"
    );
    // Channels take no rpd: one key's published limits are rpm, tpm, concurrency.
    let rpd = ok.replace("{rpm: 3}", "{rpd: 3}");
    let error =
        switchyard::config::load_str(&rpd, std::path::Path::new("t.yaml"), &Default::default())
            .unwrap_err();
    assert!(error.to_string().contains("channels.c.limits"), "{error}");
}

/// R15.3: `channels.*.limits` per key — a key whose budget is spent is left out while the
/// other key has room; with every key spent the request fails over without reaching the
/// upstream and the client gets 429 `upstream_rate_limited` with the known `Retry-After`.
#[tokio::test]
async fn a_spent_upstream_key_is_held_back_until_every_key_is_spent() {
    let up = keyed::KeyedUpstream::start(&[]).await;
    let yaml = format!(
        "channels:\n  c:\n    kind: openai\n    base_url: {}\n    keys: [k1, k2]\n    models: [m]\n    limits: {{rpm: 2}}\n{CLIENTS}",
        up.base_url()
    );
    let gw = start_gw(&yaml).await;
    for i in 0..4 {
        assert_eq!(gw.chat("m", false).await.status(), 200, "request {i}");
    }
    assert_eq!(
        (up.hits("k1"), up.hits("k2")),
        (2, 2),
        "each key's own budget"
    );
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 429);
    // B-log-truth: the final 429 says when a key has room again (within the minute).
    let wait: u64 = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .expect("retry-after on upstream_rate_limited");
    assert!((1..=60).contains(&wait), "retry-after {wait}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_rate_limited", "{body}");
    assert_eq!(
        (up.hits("k1"), up.hits("k2")),
        (2, 2),
        "never sent over budget"
    );
    let (_, e) = gw.admin_get("/admin/explain?client=alice&model=m").await;
    let held = e["keys_held_back"].as_array().cloned().unwrap_or_default();
    assert_eq!(held.len(), 2, "{e}");
    assert_eq!(held[0]["reason"], "limit", "{e}");
    gw.stop().await;
}

/// B-wait-retry-after (`routing.wait_retry_after`): a 429 whose Retry-After (2 s) is within the
/// setting is waited out once on the same target before failing over; shorter settings
/// (and the default 0) fail over at once.
#[tokio::test]
async fn a_short_retry_after_is_waited_out_on_the_same_target() {
    for (setting, hits, chain) in [
        ("3s", 2, "slow->slow->b"),
        ("1s", 1, "slow->b"),
        ("0s", 1, "slow->b"),
    ] {
        let up = keyed::KeyedUpstream::start(&["k-bad"]).await;
        let mocks = mocks(&["b"]).await;
        let yaml = fill(
            &format!(
                "routing:\n  wait_retry_after: {setting}\nresilience:\n  retry:\n    initial_backoff: 1ms\n    max_backoff: 2ms\nchannels:\n  slow:\n    kind: openai\n    base_url: {}\n    keys: [k-bad]\n    models: [m]\n    priority: 10\n    auto_ban: false\n{}{CLIENTS}",
                up.base_url(),
                channel("b", "{b}", 0, &["m"]),
            ),
            &mocks,
        );
        let gw = start_gw(&yaml).await;
        let response = gw.chat("m", false).await;
        assert_eq!(response.status(), 200, "{setting}");
        assert_eq!(route(&response), chain, "{setting}");
        assert_eq!(up.hits("k-bad"), hits, "{setting}");
        gw.stop().await;
    }
}

/// B-bounded-resources: a client trickling its body one byte every 5 s (never idle for 10 s)
/// does not hold its connection and request slot for ever: it gets 408 once the body's
/// grace period has passed, and the upstream is never called.
#[tokio::test]
async fn a_trickled_request_body_is_cut_with_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (gw, m) = gw_with("trickle", "{rpm: 0}").await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {ALICE}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let (mut rd, mut wr) = socket.into_split();
    let feeder = tokio::spawn(async move {
        loop {
            if wr.write_all(b" ").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") && started.elapsed() < Duration::from_secs(30) {
        match tokio::time::timeout(Duration::from_secs(30), rd.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    feeder.abort();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(m["a"].calls(), 0, "no upstream was asked");
    gw.stop().await;
}
