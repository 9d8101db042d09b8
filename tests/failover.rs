//! End-to-end attempt-engine tests (R3.4, R4, R5, R12.1): failover chains through the server.
#[path = "failover/latency_balance.rs"]
mod latency_balance;
use crate::support;

use std::time::Duration;

use serde_json::json;
use support::*;

fn tier_walk_config(
    tier_walk: &str,
    m: &std::collections::HashMap<String, MockUpstream>,
) -> String {
    fill(
        &format!(
            "routing:\n  retry_times: 5\n  tier_walk: {tier_walk}\nchannels:\n{}{}{}{}{CLIENTS}",
            channel("free1", "{free1}", 10, &["deepseek-chat"]),
            channel("free2", "{free2}", 10, &["deepseek-chat"]),
            channel("free3", "{free3}", 10, &["deepseek-chat"]),
            channel("paid", "{paid}", 0, &["deepseek-chat"]),
        ),
        m,
    )
}

async fn tier_walk_mocks() -> std::collections::HashMap<String, MockUpstream> {
    let mocks = mocks(&["free1", "free2", "free3", "paid"]).await;
    for n in ["free1", "free2", "free3"] {
        mocks[n].set_default(Behavior::Status {
            code: 429,
            body: None,
        });
    }
    mocks
}

/// Seed 003: three same-tier channels rate-limited, a healthy lower tier. `exhaust` tries
/// all three (any order) before the lower tier.
#[tokio::test]
async fn exhaust_tries_every_same_tier_channel_first() {
    let mocks = tier_walk_mocks().await;
    let gw = start_gw(&tier_walk_config("exhaust", &mocks)).await;
    let response = gw.chat("deepseek-chat", false).await;
    assert_eq!(response.status(), 200);
    let chain = route(&response);
    let parts: Vec<&str> = chain.split("->").collect();
    assert_eq!(parts.len(), 4, "{chain}");
    let mut first3 = parts[..3].to_vec();
    first3.sort();
    assert_eq!(first3, ["free1", "free2", "free3"]);
    assert_eq!(parts[3], "paid");
    assert_eq!(response.headers()["x-mock-name"], "paid");
    gw.stop().await;
}

/// Seed 003 with new-api's exact behaviour: one channel per tier.
#[tokio::test]
async fn one_per_tier_drops_to_the_next_tier_at_once() {
    let mocks = tier_walk_mocks().await;
    let gw = start_gw(&tier_walk_config("one_per_tier", &mocks)).await;
    let response = gw.chat("deepseek-chat", false).await;
    assert_eq!(response.status(), 200);
    let chain = route(&response);
    let parts: Vec<&str> = chain.split("->").collect();
    assert_eq!(parts.len(), 2, "{chain}");
    assert!(parts[0].starts_with("free"));
    assert_eq!(parts[1], "paid");
    gw.stop().await;
}

/// Seed 000 §6: 504 and 400 are returned as they are, without failover.
#[tokio::test]
async fn status_504_and_400_are_returned_without_failover() {
    for code in [504u16, 400] {
        let mocks = mocks(&["a", "b"]).await;
        mocks["a"].set_default(Behavior::Status { code, body: None });
        mocks["b"].set_default(Behavior::Status { code, body: None });
        let yaml = fill(
            &format!(
                "channels:\n{}{}{CLIENTS}",
                channel("a", "{a}", 10, &["m"]),
                channel("b", "{b}", 10, &["m"])
            ),
            &mocks,
        );
        let gw = start_gw(&yaml).await;
        let response = gw.chat("m", false).await;
        assert_eq!(response.status().as_u16(), code);
        assert!(
            !route(&response).contains("->"),
            "{code}: {}",
            route(&response)
        );
        assert_eq!(mocks["a"].calls() + mocks["b"].calls(), 1, "{code}");
        gw.stop().await;
    }
}

/// Seed 000 §7: two auto groups × two tiers, retry_times 3, cross_group_retry →
/// A/p0, A/p1, B/p0, B/p1 (the resetNextTry rule).
#[tokio::test]
async fn cross_group_retry_walks_groups_from_their_top_tier() {
    let mocks = mocks(&["a0", "a1", "b0", "b1"]).await;
    for n in ["a0", "a1", "b0", "b1"] {
        mocks[n].set_default(Behavior::Status {
            code: 503,
            body: None,
        });
    }
    let ch = |n: &str, g: &str, p: i64| {
        format!(
            "{}    groups: [{g}]\n",
            channel(n, &format!("{{{n}}}"), p, &["m"])
        )
    };
    let yaml = fill(
        &format!(
            "routing:\n  retry_times: 3\n  tier_walk: one_per_tier\nauto_groups: [ga, gb]\nresilience:\n  retry:\n    max_retries: 0\nchannels:\n{}{}{}{}clients:\n  alice:\n    key: sk-test-alice\n    group: auto\n    cross_group_retry: true\n",
            ch("a0", "ga", 10),
            ch("a1", "ga", 0),
            ch("b0", "gb", 10),
            ch("b1", "gb", 0)
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(route(&response), "a0->a1->b0->b1");
    gw.stop().await;
}

#[tokio::test]
async fn without_cross_group_retry_only_the_first_group_is_used() {
    let mocks = mocks(&["a0", "b0"]).await;
    mocks["a0"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let ch = |n: &str, g: &str| {
        format!(
            "{}    groups: [{g}]\n",
            channel(n, &format!("{{{n}}}"), 0, &["m"])
        )
    };
    let yaml = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\nauto_groups: [ga, gb]\nchannels:\n{}{}clients:\n  alice:\n    key: sk-test-alice\n    group: auto\n",
            ch("a0", "ga"),
            ch("b0", "gb")
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(mocks["b0"].calls(), 0);
    gw.stop().await;
}

/// R3.4: a virtual model is an ordered failover list; the target's model is sent upstream.
#[tokio::test]
async fn virtual_model_fails_over_in_target_order() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(Behavior::Status {
        code: 502,
        body: None,
    });
    let yaml = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\nchannels:\n{}{}virtual_models:\n  resilient-chat:\n    targets: [a/model-a, b/model-b]\n{CLIENTS}",
            channel("a", "{a}", 0, &["x"]),
            channel("b", "{b}", 0, &["y"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("resilient-chat", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    assert_eq!(mocks["a"].requests()[0].json().unwrap()["model"], "model-a");
    assert_eq!(mocks["b"].requests()[0].json().unwrap()["model"], "model-b");
    gw.stop().await;
}

/// R4.3: a key-caused failure moves to the channel's next key before another channel.
#[tokio::test]
async fn key_fault_moves_to_the_next_key_of_the_same_channel() {
    let mocks = mocks(&["multi", "other"]).await;
    mocks["multi"].require_key(Some("good-key".into()));
    let yaml = fill(
        "channels:\n  multi:\n    kind: openai\n    base_url: {multi}\n    keys: [\"bad-key-1\", \"good-key\"]\n    models: [m]\n    priority: 10\n    auto_ban: false\n  other:\n    kind: openai\n    base_url: {other}\n    models: [m]\n    priority: 0\nclients:\n  alice:\n    key: sk-test-alice\n",
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..4 {
        let response = gw.chat("m", false).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-mock-name"], "multi");
    }
    assert_eq!(mocks["other"].calls(), 0);
    // Never the same key twice in a row within a request.
    let reqs = mocks["multi"].requests();
    assert!(
        reqs.iter()
            .filter(|r| r.header("authorization") == Some("Bearer good-key"))
            .count()
            == 4
    );
    gw.stop().await;
}

/// R4.5: with no alternative left, a retryable status is retried on the same target.
#[tokio::test]
async fn same_target_retry_with_backoff_when_alone() {
    let mocks = mocks(&["solo"]).await;
    mocks["solo"].push(Behavior::Status {
        code: 503,
        body: None,
    });
    mocks["solo"].push(Behavior::Status {
        code: 503,
        body: None,
    });
    let yaml = fill(
        &format!("resilience:\n  retry:\n    initial_backoff: 10ms\n    max_backoff: 20ms\nchannels:\n{}{CLIENTS}", channel("solo", "{solo}", 0, &["m"])),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "solo->solo->solo");
    gw.stop().await;
}

/// R4.1/R4.7: the whole request never outlives `request_deadline`.
#[tokio::test]
async fn request_deadline_bounds_all_attempts() {
    let mocks = mocks(&["slow"]).await;
    mocks["slow"].set_default(Behavior::HangBeforeHeaders(Duration::from_secs(5)));
    let yaml = fill(
        &format!(
            "timeouts:\n  request_deadline: 300ms\nchannels:\n{}{CLIENTS}",
            channel("slow", "{slow}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let started = std::time::Instant::now();
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 504);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "deadline_exceeded");
    assert!(started.elapsed() < Duration::from_secs(4));
    gw.stop().await;
}

/// R4.9: past the retry budget a failure is returned instead of retried.
#[tokio::test]
async fn retry_budget_stops_failover() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let yaml = fill(
        &format!(
            "routing:\n  retry_budget: {{ratio: 0.0, min_per_second: 0, ttl: 10s}}\nchannels:\n{}{}{CLIENTS}",
            channel("a", "{a}", 10, &["m"]),
            channel("b", "{b}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(route(&response), "a");
    assert_eq!(mocks["b"].calls(), 0);
    assert!(gw
        .metrics()
        .await
        .contains("switchyard_retry_budget_exhausted_total"));
    gw.stop().await;
}

/// R4.9 with R4.5: a same-target retry the budget refuses is never waited for — the
/// failure comes back at once — and is not counted as a retry.
#[tokio::test]
async fn retry_budget_refuses_before_the_backoff() {
    // A channel name of its own: under `cargo test` (without nextest) every in-process
    // gateway of the suite counts retries in one metrics recorder.
    let mocks = mocks(&["budget_solo"]).await;
    mocks["budget_solo"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let yaml = fill(
        &format!(
            "routing:\n  retry_budget: {{ratio: 0.0, min_per_second: 0, ttl: 10s}}\nresilience:\n  retry:\n    initial_backoff: 5s\n    max_backoff: 5s\nchannels:\n{}{CLIENTS}",
            channel("budget_solo", "{budget_solo}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let started = std::time::Instant::now();
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    assert_eq!(route(&response), "budget_solo");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the client waited the backoff of a retry that was never made"
    );
    let text = gw.metrics().await;
    assert!(text.contains("switchyard_retry_budget_exhausted_total"));
    let counted: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("switchyard_retries_total{channel=\"budget_solo\"}") && !l.ends_with(" 0")
        })
        .collect();
    assert!(
        counted.is_empty(),
        "a refused retry was counted: {counted:?}"
    );
    gw.stop().await;
}

/// R12.1: the request log stores the chain and per-attempt outcomes.
#[tokio::test]
async fn request_log_records_the_attempt_chain() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(Behavior::Status {
        code: 500,
        body: None,
    });
    let yaml = fill(
        &format!(
            "channels:\n{}{}{CLIENTS}",
            channel("a", "{a}", 10, &["m"]),
            channel("b", "{b}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            json!({"model": "m", "messages": []}),
        )
        .await;
    assert_eq!(response.status(), 200);
    gw.flush().await;
    let (s, v) = gw.admin_get("/admin/requests?limit=5").await;
    assert_eq!(s, 200);
    let rec = &v["requests"][0];
    assert_eq!(rec["chain"], "a->b");
    assert_eq!(rec["attempts"][0]["upstream_status"], 500);
    assert_eq!(rec["attempts"][1]["upstream_status"], 200);
    assert_eq!(rec["final_status"], 200);
    assert_eq!(rec["client"], "alice");
    assert!(
        !v.to_string().contains("sk-up-"),
        "no upstream key in the log"
    );
    gw.stop().await;
}

/// R18.3 (error-code routing): a 400 saying the prompt does not fit the model
/// (`context_length_exceeded`, or Anthropic's "prompt is too long") is never resent to the
/// same upstream model: the next target with the same upstream model is skipped, the one
/// with a larger model serves. With no other model left, the 400 is the answer.
#[tokio::test]
async fn a_prompt_too_long_goes_to_a_larger_model_never_to_the_same_one_again() {
    let mocks = mocks(&["a", "b", "c"]).await;
    let yaml = fill(
        &format!(
            "routing:\n  retry_times: 5\nchannels:\n{}{}{}virtual_models:\n  grow:\n    targets: [a/small, b/small, c/large]\n  same:\n    targets: [a/small, b/small]\n{CLIENTS}",
            channel("a", "{a}", 0, &["small"]),
            channel("b", "{b}", 0, &["small"]),
            channel("c", "{c}", 0, &["large"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    mocks["a"].push(Behavior::Status {
        code: 400,
        body: Some(too_long.into()),
    });
    let response = gw.chat("grow", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->c");
    assert_eq!(
        (mocks["a"].calls(), mocks["b"].calls(), mocks["c"].calls()),
        (1, 0, 1)
    );
    // Anthropic's words for it, and no larger model to go to: the 400 is returned.
    let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    mocks["a"].push(Behavior::Status {
        code: 400,
        body: Some(anthropic.into()),
    });
    let response = gw.chat("same", false).await;
    assert_eq!(response.status(), 400);
    assert_eq!(route(&response), "a");
    assert_eq!(
        mocks["b"].calls(),
        0,
        "the same upstream model is never asked again"
    );
    // Any other 400 is the caller's and returned at once, as before.
    mocks["a"].push(Behavior::Status {
        code: 400,
        body: Some(
            r#"{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_value"}}"#
                .into(),
        ),
    });
    let response = gw.chat("grow", false).await;
    assert_eq!(
        (response.status().as_u16(), route(&response)),
        (400, "a".to_string())
    );
    gw.stop().await;
}
