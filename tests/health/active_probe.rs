//! `resilience.active_probe` (R19.2): an open breaker is probed by the gateway itself and
//! closed on success, with no client request; probes stop while the channel is healthy.

use std::time::{Duration, Instant};

use super::support::*;
use super::{channel_json, config, status500};

/// No same-target retries; a breaker that opens after two failures, needs two successes
/// to close by client traffic and stays open a minute (so only a probe can close it here).
fn probing(interval: &str) -> String {
    format!(
        "resilience:\n  retry:\n    max_retries: 0\n  circuit_breaker:\n    failure_threshold: 2\n    success_threshold: 2\n    timeout: 60s\n  active_probe:\n    enabled: true\n    interval: {interval}\n"
    )
}

async fn breaker(gw: &Gw, name: &str) -> String {
    let channel = channel_json(gw, name).await;
    channel["health"]["breaker"]["state"]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

#[tokio::test]
async fn an_open_breaker_closes_by_an_active_probe_without_client_traffic() {
    let mocks = mocks(&["ap_primary", "ap_backup"]).await;
    let yaml = config(
        &probing("1s"),
        &[
            channel("ap_primary", "{ap_primary}", 10, &["m"]),
            channel("ap_backup", "{ap_backup}", 0, &["m"]),
        ],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    // Healthy: nothing is probed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(mocks["ap_primary"].calls() + mocks["ap_backup"].calls(), 0);

    mocks["ap_primary"].set_default(status500());
    for _ in 0..2 {
        assert_eq!(route(&gw.chat("m", false).await), "ap_primary->ap_backup");
    }
    assert_eq!(breaker(&gw, "ap_primary").await, "open");
    // Still down: probes go out at the interval and the breaker stays open.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let probes = mocks["ap_primary"].calls() - 2;
    assert!((1..=4).contains(&probes), "{probes} probes in 2.5 s at 1 s");
    assert_eq!(breaker(&gw, "ap_primary").await, "open");
    let (_, explain) = gw.admin_get("/admin/explain?client=alice&model=m").await;
    let probe_state = &explain["routes"][0]["tiers"][0]["candidates"][0]["active_probe"];
    assert_eq!(probe_state["probing"], true, "{explain}");
    let probe = mocks["ap_primary"].requests().last().cloned().unwrap();
    let body = probe.json().unwrap();
    assert_eq!(body["max_tokens"], 1, "the cheapest call: {body}");
    assert_eq!(body["model"], "m");
    assert_eq!(
        probe.header("authorization"),
        Some("Bearer sk-up-ap_primary")
    );
    assert!(gw
        .metrics()
        .await
        .contains("switchyard_probe_requests_total{channel=\"ap_primary\",outcome=\"failed\"}"));

    // The upstream recovers: within interval + 1 s the breaker is closed, no client asked.
    mocks["ap_primary"].set_default(Behavior::Ok);
    let started = Instant::now();
    while breaker(&gw, "ap_primary").await != "closed" {
        assert!(started.elapsed() < Duration::from_secs(2), "still open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(mocks["ap_backup"].calls(), 2, "no client request meanwhile");
    assert!(gw
        .metrics()
        .await
        .contains("switchyard_probe_requests_total{channel=\"ap_primary\",outcome=\"ok\"} 1"));
    // Healthy again: the probes stop, and clients are served by the primary.
    let calls = mocks["ap_primary"].calls();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(mocks["ap_primary"].calls(), calls, "no probe while healthy");
    assert_eq!(route(&gw.chat("m", false).await), "ap_primary");
    let (_, explain) = gw.admin_get("/admin/explain?client=alice&model=m").await;
    let probe_state = &explain["routes"][0]["tiers"][0]["candidates"][0]["active_probe"];
    assert_eq!(probe_state["probing"], false, "{explain}");
    // Never billed: the request log holds the client's requests only.
    gw.flush().await;
    let (_, v) = gw.admin_get("/admin/requests?limit=50").await;
    assert_eq!(v["requests"].as_array().map(Vec::len), Some(3), "{v}");
    gw.stop().await;
}

#[tokio::test]
async fn a_model_breaker_is_probed_with_its_own_model_and_off_means_no_probe() {
    let mocks = mocks(&["ap_models", "ap_off"]).await;
    let scoped = format!(
        "{}  circuit_breaker:\n    scope: model\n    failure_threshold: 2\n    timeout: 60s\n",
        "resilience:\n  retry:\n    max_retries: 0\n  active_probe:\n    enabled: true\n    interval: 500ms\n"
    );
    let off = "    resilience:\n      active_probe:\n        enabled: false\n";
    let yaml = config(
        &scoped,
        &[
            format!(
                "{}    model_mapping: {{m: up-m}}\n",
                channel("ap_models", "{ap_models}", 0, &["m"])
            ),
            format!("{}{off}", channel("ap_off", "{ap_off}", 0, &["other"])),
        ],
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["ap_models"].set_default(status500());
    mocks["ap_off"].set_default(status500());
    for _ in 0..2 {
        gw.chat("m", false).await;
        let response = gw.chat("other", false).await;
        assert_eq!(
            response.status(),
            500,
            "{}",
            response.text().await.unwrap_or_default()
        );
    }
    mocks["ap_models"].set_default(Behavior::Ok);
    mocks["ap_off"].set_default(Behavior::Ok);
    let started = Instant::now();
    loop {
        let channel = channel_json(&gw, "ap_models").await;
        if channel["health"]["breaker"]["models"]
            .as_array()
            .is_some_and(|a| a.is_empty())
        {
            break;
        }
        assert!(started.elapsed() < Duration::from_millis(1500), "{channel}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let probe = mocks["ap_models"].requests().last().cloned().unwrap();
    assert_eq!(probe.json().unwrap()["model"], "up-m");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        mocks["ap_off"].calls(),
        2,
        "active_probe.enabled: false probes nothing"
    );
    gw.stop().await;
}
