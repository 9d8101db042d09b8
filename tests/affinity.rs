//! End-to-end affinity and sticky routing (R8): rule keys pin channels, bindings move only
//! after a success, skip_retry_on_failure, explain, request log, restart.
use crate::support;

use std::collections::{HashMap, HashSet};

use serde_json::json;
use support::*;
use switchyard::affinity::key::key_hash;
use switchyard::affinity::StickyKind;

const NAMES: [&str; 3] = ["a", "b", "c"];

fn channels(kind: &str, model: &str, count: usize) -> String {
    NAMES[..count]
        .iter()
        .map(|c| {
            format!(
                "  {c}:\n    kind: {kind}\n    base_url: {{{c}}}\n    keys: [\"sk-up-{c}\"]\n    models: [{model}]\n    priority: 10\n"
            )
        })
        .collect()
}

fn config(
    kind: &str,
    model: &str,
    n: usize,
    extra: &str,
    m: &HashMap<String, MockUpstream>,
) -> String {
    fill(
        &format!(
            "routing:\n  retry_times: 3\n{extra}channels:\n{}{CLIENTS}",
            channels(kind, model, n)
        ),
        m,
    )
}

async fn responses(gw: &Gw, cache_key: &str) -> reqwest::Response {
    gw.http
        .post(format!("{}/v1/responses", gw.base))
        .bearer_auth(ALICE)
        .header("idempotency-key", format!("idem-{}", fastrand::u64(..)))
        .json(&json!({"model": "gpt-test", "input": "hi", "prompt_cache_key": cache_key}))
        .send()
        .await
        .expect("sent")
}

fn served_by(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("x-mock-name")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn binding(gw: &Gw, model: &str, value: &str) -> Option<switchyard::affinity::Binding> {
    let hash = key_hash("alice", "default", model, StickyKind::Rule, value);
    gw.running.as_ref()?.gateway.bindings.get(hash)
}

/// R8.1 default rule: one `prompt_cache_key` always lands on one channel; distinct keys spread.
#[tokio::test]
async fn prompt_cache_key_pins_a_channel_and_keys_spread() {
    let mocks = mocks(&NAMES).await;
    let gw = start_gw(&config("openai", "gpt-test", 3, "", &mocks)).await;
    let mut seen = HashSet::new();
    for _ in 0..20 {
        let response = responses(&gw, "conversation-one").await;
        assert_eq!(response.status(), 200);
        seen.insert(served_by(&response));
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    let mut spread = HashSet::new();
    for i in 0..20 {
        let response = responses(&gw, &format!("key-{i}")).await;
        assert_eq!(response.status(), 200);
        spread.insert(served_by(&response));
    }
    assert!(spread.len() >= 2, "{spread:?}");
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=5").await;
    let last = &log["requests"][0];
    assert_eq!(last["sticky_kind"], "rule", "{last}");
    assert_eq!(
        last["sticky_hit"], false,
        "a fresh key has no binding: {last}"
    );
    let hits = log["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["sticky_hit"] == true)
        .count();
    assert_eq!(hits, 0);
    let (_, all) = gw.admin_get("/admin/requests?limit=40").await;
    let hits = all["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["sticky_hit"] == true)
        .count();
    assert_eq!(hits, 19, "19 of the 20 same-key requests hit the binding");
    gw.stop().await;
}

/// R8.1 default rule for Claude: `metadata.user_id` on `/v1/messages`.
#[tokio::test]
async fn claude_user_id_pins_a_channel_and_users_spread() {
    let mocks = mocks(&NAMES).await;
    let gw = start_gw(&config("anthropic", "claude-test", 3, "", &mocks)).await;
    let send = |user: String| {
        let body = json!({"model": "claude-test", "max_tokens": 8, "metadata": {"user_id": user},
            "messages": [{"role": "user", "content": "hi"}]});
        gw.post("/v1/messages", ALICE, body)
    };
    let mut seen = HashSet::new();
    for _ in 0..20 {
        let response = send("user_abc_session_1".into()).await;
        assert_eq!(response.status(), 200);
        seen.insert(served_by(&response));
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    let mut spread = HashSet::new();
    for i in 0..20 {
        let response = send(format!("user_{i}")).await;
        assert_eq!(response.status(), 200);
        spread.insert(served_by(&response));
    }
    assert!(spread.len() >= 2, "{spread:?}");
    gw.stop().await;
}

/// R8.3: a failing bound channel is left; the binding moves only after the success
/// elsewhere, and a failure neither moves nor refreshes it.
#[tokio::test]
async fn failing_bound_channel_is_left_and_binding_moves_after_success() {
    let mocks = mocks(&NAMES[..2]).await;
    let gw = start_gw(&config("openai", "gpt-test", 2, "", &mocks)).await;
    let response = responses(&gw, "k1").await;
    assert_eq!(response.status(), 200);
    let first = served_by(&response);
    let other = if first == "a" { "b" } else { "a" };
    let b0 = binding(&gw, "gpt-test", "k1").expect("bound after success");
    assert_eq!(&*b0.channel, first);

    // Both fail: the request fails; the binding is neither moved nor refreshed.
    for n in NAMES[..2].iter() {
        mocks[*n].set_default(Behavior::Status {
            code: 503,
            body: None,
        });
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let response = responses(&gw, "k1").await;
    assert_eq!(response.status(), 503);
    assert!(
        route(&response).starts_with(&format!("{first}->{other}")),
        "bound channel first: {}",
        route(&response)
    );
    let b1 = binding(&gw, "gpt-test", "k1").expect("still bound");
    assert_eq!(b1, b0, "a failure must not refresh or move the binding");

    // The other recovers: fail over from the bound channel, then the binding moves.
    mocks[other].set_default(Behavior::Ok);
    let response = responses(&gw, "k1").await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), format!("{first}->{other}"));
    let b2 = binding(&gw, "gpt-test", "k1").expect("bound");
    assert_eq!(&*b2.channel, other);
    assert!(b2.expires > b0.expires);
    for _ in 0..5 {
        let response = responses(&gw, "k1").await;
        assert_eq!(route(&response), other, "now straight to the new binding");
    }
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=6").await;
    let moved = &log["requests"][5];
    assert_eq!(moved["fallback"], true, "{moved}");
    assert_eq!(moved["sticky_hit"], true, "{moved}");
    assert_eq!(log["requests"][0]["fallback"], false);

    // /admin/explain shows the binding of a key value.
    let (s, v) = gw
        .admin_get("/admin/explain?client=alice&model=gpt-test&key=k1")
        .await;
    assert_eq!(s, 200, "{v}");
    let found = &v["affinity"]["bindings"][0];
    assert_eq!(found["kind"], "rule", "{v}");
    assert_eq!(found["channel"], other);
    assert_eq!(found["key_hash"].as_str().map(str::len), Some(32));
    assert!(
        !v["affinity"].to_string().contains("k1"),
        "raw key shown: {v}"
    );
    gw.stop().await;
}

/// R8.4: `skip_retry_on_failure` returns the bound channel's error instead of failing over.
#[tokio::test]
async fn skip_retry_on_failure_returns_the_bound_error() {
    let mocks = mocks(&NAMES[..2]).await;
    let rule = "affinity:\n  rules:\n    - name: strict\n      model: \"^gpt-.*$\"\n      path: /v1/responses\n      key: body.prompt_cache_key\n      ttl: 1h\n      skip_retry_on_failure: true\n";
    let gw = start_gw(&config("openai", "gpt-test", 2, rule, &mocks)).await;
    let response = responses(&gw, "strict-key").await;
    assert_eq!(response.status(), 200);
    let first = served_by(&response);
    mocks[first.as_str()].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let other = if first == "a" { "b" } else { "a" };
    let before = mocks[other].calls();
    let response = responses(&gw, "strict-key").await;
    assert_eq!(response.status(), 503);
    assert_eq!(route(&response), first, "no failover");
    assert_eq!(mocks[other].calls(), before);
    // A request without a binding still fails over normally.
    let response = responses(&gw, "fresh-key").await;
    assert_eq!(response.status(), 200);
    gw.stop().await;
}

/// R8.3: bindings survive a restart (snapshot at shutdown, restore at start).
#[tokio::test]
async fn bindings_survive_a_restart() {
    let mocks = mocks(&NAMES).await;
    let yaml = config("openai", "gpt-test", 3, "", &mocks);
    let mut gw = start_gw(&yaml).await;
    let mut bound: HashMap<String, String> = HashMap::new();
    for i in 0..6 {
        let key = format!("restart-{i}");
        let response = responses(&gw, &key).await;
        assert_eq!(response.status(), 200);
        bound.insert(key, served_by(&response));
    }
    if let Some(r) = gw.running.take() {
        r.shutdown().await;
    }
    let gw = start_in(gw.dir, &yaml).await;
    for (k, ch) in &bound {
        let binding = binding(&gw, "gpt-test", k).expect("restored");
        assert_eq!(&*binding.channel, ch.as_str());
        let response = responses(&gw, k).await;
        assert_eq!(&served_by(&response), ch);
    }
    let metrics = gw.metrics().await;
    if !metrics.is_empty() {
        assert!(metrics.contains("switchyard_sticky_total"), "{metrics}");
    }
    gw.stop().await;
}

async fn last_logged(gw: &Gw) -> serde_json::Value {
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=1").await;
    log["requests"][0].clone()
}

/// B-client-compat: Claude Code's `metadata.user_id` is a JSON string today; the key is its
/// `session_id`, so a later request of the session whose JSON differs (a new field, another
/// account) still lands on the bound channel.
#[tokio::test]
async fn claude_code_json_user_id_sticks_by_session() {
    let mocks = mocks(&NAMES).await;
    let gw = start_gw(&config("anthropic", "claude-test", 3, "", &mocks)).await;
    let send = |user_id: &str| {
        let body = json!({"model": "claude-test", "max_tokens": 8, "metadata": {"user_id": user_id},
            "messages": [{"role": "user", "content": "hi"}]});
        gw.post("/v1/messages", ALICE, body)
    };
    let first = send(r#"{"device_id":"d1","account_uuid":"acc-1","session_id":"sess-9"}"#).await;
    assert_eq!(first.status(), 200);
    let bound = served_by(&first);
    let later =
        send(r#"{"device_id":"d1","account_uuid":"","session_id":"sess-9","future":true}"#).await;
    assert_eq!(later.status(), 200);
    assert_eq!(served_by(&later), bound);
    let log = last_logged(&gw).await;
    assert_eq!(
        (&log["sticky_kind"], &log["sticky_hit"]),
        (&json!("rule"), &json!(true)),
        "{log}"
    );
    gw.stop().await;
}

/// B-client-compat: Codex's `session-id` header is a session key on any surface.
#[tokio::test]
async fn codex_session_header_sticks() {
    let mocks = mocks(&NAMES).await;
    let gw = start_gw(&config("openai", "gpt-test", 3, "", &mocks)).await;
    let send = || {
        gw.http
            .post(format!("{}/v1/responses", gw.base))
            .bearer_auth(ALICE)
            .header("idempotency-key", format!("idem-{}", fastrand::u64(..)))
            .header("session-id", "codex-session-1")
            .json(&json!({"model": "gpt-test", "input": "hi"}))
            .send()
    };
    let first = send().await.expect("sent");
    let bound = served_by(&first);
    for _ in 0..3 {
        let response = send().await.expect("sent");
        assert_eq!(served_by(&response), bound);
    }
    let log = last_logged(&gw).await;
    assert_eq!(
        (&log["sticky_kind"], &log["sticky_hit"]),
        (&json!("session"), &json!(true)),
        "{log}"
    );
    gw.stop().await;
}
