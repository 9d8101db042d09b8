//! `routing.balance: latency` (R19.1): power of two choices within a tier over the moving
//! latency and error score of each (channel, model), end to end over real sockets.

use std::time::Duration;

use super::support::*;

const LATENCY: &str = "routing:\n  balance: latency\n";

/// Two same-tier channels serving `m` (plus `extra` channel blocks).
fn pair(a: &str, b: &str, extra: &str) -> String {
    format!(
        "{LATENCY}channels:\n{}{}{extra}{CLIENTS}",
        channel(a, &format!("{{{a}}}"), 0, &["m"]),
        channel(b, &format!("{{{b}}}"), 0, &["m"]),
    )
}

async fn answered_by(gw: &Gw) -> String {
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    route(&response)
}

/// The explain view's candidates of `m` for alice: name → score.
async fn scores(gw: &Gw) -> std::collections::HashMap<String, serde_json::Value> {
    let (s, v) = gw.admin_get("/admin/explain?client=alice&model=m").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["balance"], "latency");
    let mut out = std::collections::HashMap::new();
    for c in v["routes"][0]["tiers"][0]["candidates"].as_array().unwrap() {
        // These tests send non-stream requests.
        out.insert(
            c["name"].as_str().unwrap().to_string(),
            c["score"]["non_stream"].clone(),
        );
    }
    out
}

#[tokio::test]
async fn the_faster_channel_takes_most_requests_and_the_slower_is_still_tried() {
    let upstreams = mocks(&["fast", "slow"]).await;
    let gw = start_gw(&fill(&pair("fast", "slow", ""), &upstreams)).await;
    upstreams["slow"].set_default(Behavior::HangBeforeHeaders(Duration::from_millis(300)));
    let mut slow_after_warmup = 0;
    for i in 0..60 {
        let by = answered_by(&gw).await;
        if i >= 10 && by == "slow" {
            slow_after_warmup += 1;
        }
    }
    let (fast, slow) = (upstreams["fast"].calls(), upstreams["slow"].calls());
    eprintln!("fast {fast}, slow {slow}, slow after the warm-up {slow_after_warmup}");
    assert_eq!(fast + slow, 60);
    assert!(
        fast >= 45,
        "the faster one takes at least three quarters: {fast} / 60"
    );
    assert!(
        slow_after_warmup >= 1,
        "the slower one keeps a share once known slow: {slow} in all"
    );
    let latency_scores = scores(&gw).await;
    let lat = |n: &str| latency_scores[n]["latency"].as_f64().unwrap();
    assert!(lat("slow") > lat("fast") + 0.2, "{latency_scores:?}");

    // Reload with a third channel: the surviving channels keep their scores, the new one
    // starts unscored (neutral).
    let with_new = "  new:\n    kind: openai\n    base_url: {new}\n    models: [m]\n";
    let m2 = {
        let mut m2 = upstreams.clone();
        m2.extend(mocks(&["new"]).await);
        m2
    };
    gw.rewrite(&fill(&pair("fast", "slow", with_new), &m2));
    assert!(gw.wait_generation(2).await, "reloaded");
    let scores = scores(&gw).await;
    assert!(
        scores["fast"]["samples"].as_u64().unwrap() >= 45,
        "{scores:?}"
    );
    assert!(scores["new"].is_null(), "{scores:?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_channel_that_becomes_slow_loses_its_share_within_a_few_requests() {
    let mocks = mocks(&["a", "b"]).await;
    let gw = start_gw(&fill(&pair("a", "b", ""), &mocks)).await;
    for _ in 0..10 {
        answered_by(&gw).await;
    }
    mocks["a"].set_default(Behavior::HangBeforeHeaders(Duration::from_millis(300)));
    let before = mocks["a"].calls();
    let mut a_late = 0;
    for i in 0..30 {
        if answered_by(&gw).await == "a" && i >= 3 {
            a_late += 1;
        }
    }
    let calls_a = mocks["a"].calls() - before;
    eprintln!("a took {calls_a} of 30 after it became slow ({a_late} after the third)");
    // One slow answer puts its score far behind b's; from then on it keeps only the
    // exploring share (a tenth), where an even split would give it fifteen.
    assert!(calls_a <= 8, "a took {calls_a} of 30 after it became slow");
    assert!(a_late <= 7, "{a_late}");
    gw.stop().await;
}

/// The issue 32 keys: defaults leave behaviour as it was, and every bad value is refused
/// with its key path.
#[tokio::test]
async fn the_learning_keys_are_validated_with_their_paths() {
    let ok = "routing:\n  balance: latency\nresilience:\n  active_probe: {enabled: true, interval: 2s, model: gpt-x}\n  hedge: {enabled: true, after: 500ms, max_extra: 2, budget_ratio: 0.2}\n";
    let ch =
        "channels:\n  c:\n    kind: openai\n    base_url: http://127.0.0.1:1/v1\n    models: [m]\n";
    let gw = try_start_gw(&format!("{ok}{ch}{CLIENTS}"))
        .await
        .expect("valid");
    let cfg = gw
        .running
        .as_ref()
        .unwrap()
        .gateway
        .snapshot()
        .table
        .config
        .clone();
    assert_eq!(cfg.routing.balance.as_str(), "latency");
    assert_eq!(cfg.resilience.active_probe.interval, Duration::from_secs(2));
    assert_eq!(cfg.resilience.active_probe.model, "gpt-x");
    assert_eq!(cfg.resilience.hedge.max_extra, 2);
    assert!(!cfg.resilience.hedge.p95);
    gw.stop().await;
    let p95 = "resilience:\n  hedge: {enabled: true, after: p95}\n";
    let gw = try_start_gw(&format!("{p95}{ch}{CLIENTS}"))
        .await
        .expect("valid");
    let cfg = gw
        .running
        .as_ref()
        .unwrap()
        .gateway
        .snapshot()
        .table
        .config
        .clone();
    assert!(cfg.resilience.hedge.p95);
    assert_eq!(
        cfg.resilience.hedge.after,
        Duration::from_secs(2),
        "until known"
    );
    gw.stop().await;
    let gw = try_start_gw(&format!("{ch}{CLIENTS}"))
        .await
        .expect("valid");
    let cfg = gw
        .running
        .as_ref()
        .unwrap()
        .gateway
        .snapshot()
        .table
        .config
        .clone();
    assert_eq!(cfg.routing.balance.as_str(), "weight");
    assert!(!cfg.resilience.active_probe.enabled && !cfg.resilience.hedge.enabled);
    assert_eq!(cfg.timeouts.min_tokens_per_second, 0.0);
    gw.stop().await;
    for (yaml, key) in [
        ("routing:\n  balance: fastest\n", "routing.balance"),
        (
            "resilience:\n  active_probe: {interval: 0s}\n",
            "resilience.active_probe.interval",
        ),
        (
            "resilience:\n  active_probe: {model: ' '}\n",
            "resilience.active_probe.model",
        ),
        (
            "resilience:\n  active_probe: {every: 1s}\n",
            "resilience.active_probe.every",
        ),
        (
            "resilience:\n  hedge: {after: soon}\n",
            "resilience.hedge.after",
        ),
        (
            "resilience:\n  hedge: {max_extra: 0}\n",
            "resilience.hedge.max_extra",
        ),
        (
            "resilience:\n  hedge: {budget_ratio: 2}\n",
            "resilience.hedge.budget_ratio",
        ),
    ] {
        let error = try_start_gw(&format!("{yaml}{ch}{CLIENTS}"))
            .await
            .err()
            .expect(yaml);
        assert!(error.contains(key), "{yaml}: {error}");
    }
    // Per channel, under the channel's own resilience block.
    let own = format!("{ch}    resilience:\n      hedge: {{budget_ratio: -1}}\n{CLIENTS}");
    let refusal = try_start_gw(&own).await.err().expect("refused");
    assert!(
        refusal.contains("channels.c.resilience.hedge.budget_ratio"),
        "{refusal}"
    );
}
