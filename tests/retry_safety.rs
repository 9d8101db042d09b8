//! End-to-end retry safety (R10): image replays by tier and key, Idempotency-Key forwarding,
//! non-replayable pass-through families, task relay locking, and `possibly_charged`.
use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use support::*;

const FAST_RETRY: &str =
    "resilience:\n  retry:\n    initial_backoff: 10ms\n    max_backoff: 20ms\n";

fn status(code: u16) -> Behavior {
    Behavior::Status { code, body: None }
}

fn image_body() -> serde_json::Value {
    json!({"model": "img", "prompt": "a red fox"})
}

/// Two channels serving `img`: `a` (priority 10, keys `ka1`, `ka2`) and `b` (priority 0).
fn image_yaml(mocks: &HashMap<String, MockUpstream>, extra: &str) -> String {
    fill(
        &format!(
            "{extra}{FAST_RETRY}channels:\n  a:\n    kind: openai\n    base_url: {{a}}\n    keys: [\"ka1\", \"ka2\"]\n    models: [img]\n    priority: 10\n    auto_ban: false\n{}{CLIENTS}",
            channel("b", "{b}", 0, &["img"])
        ),
        mocks,
    )
}

fn keys_seen(mock: &MockUpstream) -> Vec<String> {
    mock.requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or("").to_string())
        .collect()
}

/// R10.1: images are never replayed by default — a 503 is returned, the second channel idle.
#[tokio::test]
async fn image_503_is_not_replayed_by_default() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(status(503));
    let gw = start_gw(&image_yaml(&mocks, "")).await;
    let response = gw.post("/v1/images/generations", ALICE, image_body()).await;
    assert_eq!(response.status(), 503);
    assert_eq!(mocks["a"].calls(), 1);
    assert_eq!(mocks["b"].calls(), 0);
    gw.stop().await;
}

/// R10.3 tier 1: a 429 goes to the channel's next key, then to the next channel.
#[tokio::test]
async fn image_429_replays_next_key_then_next_channel() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(status(429));
    let gw = start_gw(&image_yaml(&mocks, "images_failover:\n  enabled: true\n")).await;
    let response = gw.post("/v1/images/generations", ALICE, image_body()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-mock-name"], "b");
    assert_eq!(route(&response), "a->a->b");
    let mut keys = keys_seen(&mocks["a"]);
    assert_eq!(keys.len(), 2, "each key of a once: {keys:?}");
    keys.sort();
    assert_eq!(
        keys,
        ["Bearer ka1", "Bearer ka2"],
        "never the same key twice"
    );
    assert_eq!(keys_seen(&mocks["b"]), ["Bearer sk-up-b"]);
    gw.stop().await;
}

/// R10.3: a 500 may already be generating — replayed only under `include_ambiguous`.
#[tokio::test]
async fn image_500_replays_only_with_include_ambiguous() {
    for (extra, replayed) in [
        ("images_failover:\n  enabled: true\n", false),
        (
            "images_failover:\n  enabled: true\n  include_ambiguous: true\n",
            true,
        ),
    ] {
        let mocks = mocks(&["a", "b"]).await;
        mocks["a"].set_default(status(500));
        let gw = start_gw(&image_yaml(&mocks, extra)).await;
        let response = gw.post("/v1/images/generations", ALICE, image_body()).await;
        if replayed {
            assert_eq!(response.status(), 200, "{extra}");
            assert_eq!(mocks["b"].calls(), 1);
        } else {
            assert_eq!(response.status(), 500, "{extra}");
            assert_eq!(mocks["a"].calls(), 1);
            assert_eq!(mocks["b"].calls(), 0);
        }
        gw.stop().await;
    }
}

/// R10.3: a 504 is the most likely "image exists" case — only `include_uncertain` replays it.
#[tokio::test]
async fn image_504_replays_only_with_include_uncertain() {
    for (extra, replayed) in [
        ("images_failover:\n  enabled: true\n", false),
        (
            "images_failover:\n  enabled: true\n  include_ambiguous: true\n",
            false,
        ),
        (
            "images_failover:\n  enabled: true\n  include_uncertain: true\n",
            true,
        ),
    ] {
        let mocks = mocks(&["a", "b"]).await;
        mocks["a"].set_default(status(504));
        let gw = start_gw(&image_yaml(&mocks, extra)).await;
        let response = gw.post("/v1/images/generations", ALICE, image_body()).await;
        if replayed {
            assert_eq!(response.status(), 200, "{extra}");
            assert_eq!(mocks["b"].calls(), 1);
        } else {
            assert_eq!(response.status(), 504, "{extra}");
            assert_eq!(mocks["a"].calls(), 1, "{extra}");
            assert_eq!(mocks["b"].calls(), 0, "{extra}");
        }
        gw.stop().await;
    }
}

async fn post_responses(gw: &Gw, key: Option<&str>) -> reqwest::Response {
    let mut req = gw
        .http
        .post(format!("{}/v1/responses", gw.base))
        .bearer_auth(ALICE)
        .json(&json!({"model": "m", "input": "hi"}));
    if let Some(k) = key {
        req = req.header("idempotency-key", k);
    }
    req.send().await.expect("request sent")
}

/// R10.1/R10.2: an ambiguous failure of `/v1/responses` (a 502: the upstream may have
/// generated) is replayed only with a valid Idempotency-Key, and the key arrives on every
/// same-target retry.
#[tokio::test]
async fn responses_replayed_only_with_idempotency_key_on_every_retry() {
    let mocks = mocks(&["solo"]).await;
    let yaml = fill(
        &format!(
            "{FAST_RETRY}channels:\n{}{CLIENTS}",
            channel("solo", "{solo}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    // Without a key (and with an invalid one): one attempt, the 503 is returned.
    for key in [None, Some("not valid"), Some(&*"k".repeat(256))] {
        mocks["solo"].reset();
        mocks["solo"].push(status(502));
        let response = post_responses(&gw, key).await;
        assert_eq!(response.status(), 502, "{key:?}");
        assert_eq!(mocks["solo"].calls(), 1, "{key:?}");
        assert_eq!(mocks["solo"].requests()[0].header("idempotency-key"), None);
    }
    mocks["solo"].reset();
    mocks["solo"].push(status(502));
    mocks["solo"].push(status(502));
    let response = post_responses(&gw, Some("order-42")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "solo->solo->solo");
    let reqs = mocks["solo"].requests();
    assert_eq!(reqs.len(), 3);
    for q in &reqs {
        assert_eq!(q.header("idempotency-key"), Some("order-42"));
    }
    gw.stop().await;
}

/// R10.2: the channel's next key sends the same body and carries the client's key; a
/// failover to a different channel (a different body) carries a key derived for that target
/// (R10.2), never the client's.
#[tokio::test]
async fn failover_to_another_channel_carries_a_key_of_its_own() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(status(429));
    let yaml = fill(
        &format!(
            "{FAST_RETRY}channels:\n  a:\n    kind: openai\n    base_url: {{a}}\n    keys: [\"ka1\", \"ka2\"]\n    models: [m]\n    priority: 10\n    auto_ban: false\n{}{CLIENTS}",
            channel("b", "{b}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = post_responses(&gw, Some("order-43")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->a->b");
    let requests = mocks["a"].requests();
    assert_ne!(
        requests[0].header("authorization"),
        requests[1].header("authorization")
    );
    for q in &requests {
        assert_eq!(q.header("idempotency-key"), Some("order-43"));
    }
    assert_eq!(
        mocks["b"].requests()[0].header("idempotency-key"),
        Some("order-43:b/m")
    );
    gw.stop().await;
}

fn video_yaml(mocks: &HashMap<String, MockUpstream>, tasks: bool) -> String {
    let ch = |n: &str, p: i64| {
        format!(
            "{}    paths: [/v1/videos]\n",
            channel(n, &format!("{{{n}}}"), p, &["sora"])
        )
    };
    let tasks = if tasks {
        "tasks:\n  paths: [/v1/videos]\n"
    } else {
        ""
    };
    fill(
        &format!(
            "{tasks}{FAST_RETRY}channels:\n{}{}{CLIENTS}",
            ch("hi", 10),
            ch("lo", 0)
        ),
        mocks,
    )
}

/// R10.1: videos arrive through `/v1/*` pass-through and are still not replayed.
#[tokio::test]
async fn video_pass_through_is_not_replayed() {
    let mocks = mocks(&["hi", "lo"]).await;
    mocks["hi"].set_default(status(503));
    let gw = start_gw(&video_yaml(&mocks, false)).await;
    let response = gw
        .post("/v1/videos", ALICE, json!({"model": "sora", "prompt": "x"}))
        .await;
    assert_eq!(response.status(), 503);
    assert_eq!(mocks["hi"].calls(), 1);
    assert_eq!(mocks["lo"].calls(), 0);
    gw.stop().await;
}

async fn get(gw: &Gw, path: &str) -> reqwest::Response {
    gw.http
        .get(format!("{}{}", gw.base, path))
        .bearer_auth(ALICE)
        .send()
        .await
        .expect("request sent")
}

/// R10.5: a task submission uses the task rule; its polls are locked to the accepting
/// channel even when a higher-priority channel is healthy or the accepting one fails.
#[tokio::test]
async fn task_follow_ups_are_locked_to_the_accepting_channel() {
    let mocks = mocks(&["hi", "lo"]).await;
    mocks["hi"].push(status(503));
    let gw = start_gw(&video_yaml(&mocks, true)).await;
    let response = gw
        .post("/v1/videos", ALICE, json!({"model": "sora", "prompt": "x"}))
        .await;
    assert_eq!(
        response.status(),
        200,
        "the task rule replays a rejected submit"
    );
    assert_eq!(route(&response), "hi->lo");
    let body: serde_json::Value = response.json().await.unwrap();
    let id = body["id"].as_str().unwrap().to_string();

    // hi is healthy and ranks higher; the poll still goes to lo.
    let hi_before = mocks["hi"].calls();
    let response = get(&gw, &format!("/v1/videos/{id}")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-mock-name"], "lo");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["id"], id.as_str());
    assert_eq!(mocks["hi"].calls(), hi_before);

    // lo now fails: every retry stays on lo, hi is never asked.
    mocks["lo"].set_default(status(502));
    let lo_before = mocks["lo"].calls();
    let response = get(&gw, &format!("/v1/videos/{id}")).await;
    assert_eq!(response.status(), 502);
    assert!(
        route(&response).split("->").all(|c| c == "lo"),
        "{}",
        route(&response)
    );
    assert!(mocks["lo"].calls() - lo_before >= 2, "retried on lo");
    assert_eq!(mocks["hi"].calls(), hi_before);

    // Unknown task: 404, no upstream touched.
    let (hi_n, lo_n) = (mocks["hi"].calls(), mocks["lo"].calls());
    let response = get(&gw, "/v1/videos/task_unknown").await;
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "task_not_found");
    assert_eq!((mocks["hi"].calls(), mocks["lo"].calls()), (hi_n, lo_n));

    // The binding is durable.
    gw.flush().await;
    let store = &gw.running.as_ref().unwrap().gateway.store;
    assert_eq!(store.task_channels("alice", &id).await.unwrap(), ["lo"]);
    gw.stop().await;
}

/// R10.5: a binding stored in SQLite survives a restart (the in-memory cache is empty).
#[tokio::test]
async fn task_binding_survives_restart() {
    let mocks = mocks(&["hi", "lo"]).await;
    mocks["hi"].push(status(503));
    let yaml = video_yaml(&mocks, true);
    let gw = start_gw(&yaml).await;
    let response = gw
        .post("/v1/videos", ALICE, json!({"model": "sora", "prompt": "x"}))
        .await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    let id = body["id"].as_str().unwrap().to_string();
    gw.flush().await;
    let Gw { running, dir, .. } = gw;
    if let Some(r) = running {
        r.shutdown().await;
    }
    let gw = start_in(dir, &yaml).await;
    let response = get(&gw, &format!("/v1/videos/{id}")).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-mock-name"], "lo");
    gw.stop().await;
}

/// R10.4: a timed-out image attempt is marked `possibly_charged`; a timed-out chat is not.
#[tokio::test]
async fn timed_out_image_is_marked_possibly_charged() {
    let mocks = mocks(&["slow"]).await;
    mocks["slow"].set_default(Behavior::HangBeforeHeaders(Duration::from_secs(3)));
    let yaml = fill(
        &format!(
            "timeouts:\n  upstream_header: 200ms\n  image_upstream_header: 200ms\n  non_stream: 200ms\nchannels:\n{}{CLIENTS}",
            channel("slow", "{slow}", 0, &["img", "m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.post("/v1/images/generations", ALICE, image_body()).await;
    assert_eq!(response.status(), 504);
    gw.flush().await;
    let (_, v) = gw.admin_get("/admin/requests?limit=5").await;
    let rec = &v["requests"][0];
    assert_eq!(rec["path"], "/v1/images/generations");
    assert_eq!(rec["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(rec["attempts"][0]["possibly_charged"], true);

    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            json!({"model": "m", "messages": []}),
        )
        .await;
    assert_eq!(response.status(), 504);
    gw.flush().await;
    let (_, v) = gw.admin_get("/admin/requests?limit=5").await;
    let rec = &v["requests"][0];
    assert_eq!(rec["path"], "/v1/chat/completions");
    assert_eq!(rec["attempts"][0]["possibly_charged"], false);
    gw.stop().await;
}
