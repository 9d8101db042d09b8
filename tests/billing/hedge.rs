//! `resilience.hedge` (R19.3, opt-in): a late first attempt is hedged on the next target;
//! the first to commit wins, the other is cancelled at once, the client is charged once and
//! a hedge budget bounds the extra calls.

use std::time::{Duration, Instant};

use super::support::*;
use super::{account, default_price, mock_cost, totals, yaml};

fn hedged(after: &str, ratio: &str) -> String {
    format!("resilience:\n  retry:\n    max_retries: 0\n  hedge:\n    enabled: true\n    after: {after}\n    budget_ratio: {ratio}\n")
}

async fn gateway(hedge: &str) -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a", "b"]).await;
    let body = yaml(
        &[("a", 10), ("b", 0)],
        &mocks,
        "    quota: 100\n",
        &default_price(),
    );
    (start_gw(&format!("{hedge}{body}")).await, mocks)
}

async fn disconnected(mock: &MockUpstream) -> bool {
    let started = Instant::now();
    while mock.disconnects() == 0 && started.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    mock.disconnects() == 1
}

#[tokio::test]
async fn a_late_primary_is_hedged_the_fallback_answers_and_the_client_is_charged_once() {
    for stream in [false, true] {
        let (gw, m) = gateway(&hedged("200ms", "1.0")).await;
        // Headers at once, the answer after 3 s: the first byte (non-stream: the whole
        // answer; stream: the commit point) is late.
        m["a"].set_default(if stream {
            Behavior::StallAfterHeaders(Duration::from_secs(3))
        } else {
            Behavior::SlowBody {
                delay: Duration::from_secs(3),
            }
        });
        let started = Instant::now();
        let response = gw.chat("m", stream).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-mock-name"], "b", "stream={stream}");
        assert_eq!(route(&response), "a->b");
        let text = response.text().await.unwrap();
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "{:?}",
            started.elapsed()
        );
        assert!(!text.contains("stream_incomplete"), "{text}");
        assert!(
            disconnected(&m["a"]).await,
            "the primary's request is cancelled"
        );
        // Charged once: the winner's usage.
        let totals = totals(&gw).await;
        assert_eq!((totals.charged, totals.refunded), (mock_cost(), 0));
        assert_eq!(account(&gw).await["charged_micro"], mock_cost());
        let rows = super::support::streams::requests(&gw).await;
        let attempts = &rows[0]["attempts"];
        assert_eq!(attempts[0]["error_class"], "hedge_cancelled", "{}", rows[0]);
        assert_eq!(attempts[0]["possibly_charged"], true, "{}", rows[0]);
        let metrics = gw.metrics().await;
        assert!(
            !metrics.contains("switchyard_hedges_total{outcome=\"won\"} 0"),
            "{metrics}"
        );
        gw.stop().await;
    }
}

#[tokio::test]
async fn a_stream_that_committed_is_never_hedged_and_a_prompt_answer_is_not_either() {
    let (gw, m) = gateway(&hedged("300ms", "1.0")).await;
    // The first content at once, the rest trickling well past `after`.
    m["a"].set_default(Behavior::Stream {
        chunks: 6,
        delay: Duration::from_millis(200),
    });
    let response = gw.chat("m", true).await;
    assert_eq!(route(&response), "a");
    assert!(response.text().await.unwrap().contains("[DONE]"));
    m["a"].set_default(Behavior::Ok);
    assert_eq!(route(&gw.chat("m", false).await), "a");
    assert_eq!(m["b"].calls(), 0, "never hedged");
    gw.stop().await;
}

#[tokio::test]
async fn the_hedge_budget_holds_under_an_outage() {
    let (gw, m) = gateway(&hedged("50ms", "0.1")).await;
    // An outage of the primary: every answer late.
    m["a"].set_default(Behavior::SlowBody {
        delay: Duration::from_millis(250),
    });
    let requests = 20;
    for _ in 0..requests {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    let extra = m["b"].calls();
    // 0.1 per first attempt over the window: at most 2 of 20 (one more for the rounding).
    assert!(
        (1..=3).contains(&extra),
        "{extra} hedges for {requests} requests"
    );
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("switchyard_hedges_total{outcome=\"budget\"}"),
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn hedging_is_off_by_default_and_never_for_requests_unsafe_to_send_twice() {
    // Off by default: the slow primary is waited for.
    let (gw, m) = gateway("").await;
    m["a"].set_default(Behavior::SlowBody {
        delay: Duration::from_millis(600),
    });
    assert_eq!(route(&gw.chat("m", false).await), "a");
    gw.stop().await;
    // `/v1/responses` without an Idempotency-Key (R10.1) is never sent twice.
    let (gw, m) = gateway(&hedged("100ms", "1.0")).await;
    m["a"].set_default(Behavior::SlowBody {
        delay: Duration::from_millis(600),
    });
    let response = gw
        .post(
            "/v1/responses",
            ALICE,
            serde_json::json!({"model": "m", "input": "hi"}),
        )
        .await;
    assert_eq!(route(&response), "a");
    assert_eq!(m["b"].calls(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn after_p95_hedges_past_the_targets_own_recent_times() {
    let (gw, m) = gateway(&hedged("p95", "1.0")).await;
    // Until 20 answers are known the fixed default (2 s) applies: fast answers, no hedge.
    for _ in 0..20 {
        assert_eq!(route(&gw.chat("m", false).await), "a");
    }
    assert_eq!(m["b"].calls(), 0);
    // Then an answer far past the primary's own 95th percentile is hedged at once.
    m["a"].set_default(Behavior::SlowBody {
        delay: Duration::from_secs(3),
    });
    let started = Instant::now();
    let response = gw.chat("m", false).await;
    assert_eq!(route(&response), "a->b");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_hedge_that_loses_is_cancelled_and_the_first_answer_is_charged_once() {
    let (gw, m) = gateway(&hedged("100ms", "1.0")).await;
    m["a"].set_default(Behavior::StallAfterHeaders(Duration::from_millis(500)));
    m["b"].set_default(Behavior::StallAfterHeaders(Duration::from_secs(3)));
    let started = Instant::now();
    let response = gw.chat("m", true).await;
    assert_eq!(response.headers()["x-mock-name"], "a");
    assert!(response.text().await.unwrap().contains("[DONE]"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(disconnected(&m["b"]).await, "the losing hedge is cancelled");
    let totals = totals(&gw).await;
    assert_eq!((totals.charged, totals.refunded), (mock_cost(), 0));
    let rows = super::support::streams::requests(&gw).await;
    let attempts = rows[0]["attempts"].as_array().cloned().unwrap_or_default();
    assert_eq!(attempts.len(), 2, "{}", rows[0]);
    assert_eq!(attempts[0]["channel"], "a", "{}", rows[0]);
    assert_eq!(attempts[1]["error_class"], "hedge_cancelled", "{}", rows[0]);
    let metrics = gw.metrics().await;
    assert!(
        !metrics.contains("switchyard_hedges_total{outcome=\"lost\"} 0"),
        "{metrics}"
    );
    gw.stop().await;
}

/// Crossing: the hedge lands on a channel of another kind. An OpenAI client's late primary
/// (`openai`) is hedged on an `anthropic` channel: the client gets the fallback's answer,
/// translated into its own format, in well under a second; the primary's request is
/// cancelled; and the client is charged once, at the winner's usage.
#[tokio::test]
async fn a_hedge_on_a_channel_of_another_kind_answers_translated_and_charges_once() {
    for stream in [false, true] {
        let mocks = mocks(&["a", "b"]).await;
        let body = yaml(
            &[("a", 10), ("b", 0)],
            &mocks,
            "    quota: 100\n",
            &default_price(),
        );
        let at_b = body.find("  b:\n").expect("channel b");
        let body = format!(
            "{}{}",
            &body[..at_b],
            body[at_b..].replacen("kind: openai", "kind: anthropic", 1)
        );
        let gw = start_gw(&format!("{}{body}", hedged("200ms", "1.0"))).await;
        mocks["a"].set_default(if stream {
            Behavior::StallAfterHeaders(Duration::from_secs(3))
        } else {
            Behavior::SlowBody {
                delay: Duration::from_secs(3),
            }
        });
        let started = Instant::now();
        let response = gw.chat("m", stream).await;
        assert_eq!(response.status(), 200, "stream={stream}");
        assert_eq!(response.headers()["x-mock-name"], "b", "stream={stream}");
        assert_eq!(route(&response), "a->b");
        let text = response.text().await.unwrap();
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "{:?}",
            started.elapsed()
        );
        let object = if stream {
            "chat.completion.chunk"
        } else {
            "chat.completion"
        };
        assert!(text.contains(object), "the client's own format: {text}");
        assert!(!text.contains("stream_incomplete"), "{text}");
        assert!(
            disconnected(&mocks["a"]).await,
            "the primary's request is cancelled"
        );
        let rows = super::support::streams::requests(&gw).await;
        let row = &rows[0];
        assert_eq!(
            row["attempts"][0]["error_class"], "hedge_cancelled",
            "{row}"
        );
        let used = row["prompt_tokens"].as_i64().unwrap() * super::IN_PRICE
            + row["completion_tokens"].as_i64().unwrap() * super::OUT_PRICE;
        assert!(used > 0, "{row}");
        let totals = totals(&gw).await;
        assert_eq!(
            (totals.charged, totals.refunded),
            (used, 0),
            "charged once: {row}"
        );
        assert_eq!(account(&gw).await["charged_micro"], used);
        gw.stop().await;
    }
}
