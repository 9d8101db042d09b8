//! Billing against real traffic (R11.1, R9.8): Anthropic cache tokens normalised and
//! priced, and a precharge returned the moment its client goes away.
use crate::support;

use std::time::{Duration, Instant};

use support::streams::*;
use support::*;
use switchyard_mock::{CACHED_TOKENS, CACHE_WRITE_TOKENS, DEFAULT_CHUNKS, PROMPT_TOKENS};

async fn account(gw: &Gw) -> serde_json::Value {
    let (s, v) = gw.admin_get("/admin/clients/alice").await;
    assert_eq!(s, 200, "{v}");
    v
}

fn yaml(
    kind: &str,
    mocks: &std::collections::HashMap<String, MockUpstream>,
    price: &str,
) -> String {
    fill(
        &format!(
            "channels:\n{}clients:\n  alice:\n    key: {ALICE}\n    quota: 1000\npricing:\n  m: {price}\n",
            ch("a", kind, 0, "")
        ),
        mocks,
    )
}

/// Anthropic's `input_tokens` excludes cache reads and writes; they are added to the prompt
/// count, logged, and charged at `cache_read` / `cache_write` (default: the input price).
#[tokio::test]
async fn anthropic_cache_tokens_are_counted_and_priced() {
    let uncached = PROMPT_TOKENS - CACHED_TOKENS - CACHE_WRITE_TOKENS;
    let cases = [
        // (price, expected micro-credits)
        (
            "{input: 1000, output: 2000}",
            PROMPT_TOKENS * 1000 + DEFAULT_CHUNKS as u64 * 2000,
        ),
        (
            "{input: 1000, output: 2000, cache_read: 100, cache_write: 1250}",
            uncached * 1000
                + CACHED_TOKENS * 100
                + CACHE_WRITE_TOKENS * 1250
                + DEFAULT_CHUNKS as u64 * 2000,
        ),
    ];
    for (price, want) in cases {
        for stream in [false, true] {
            let mocks = mocks(&["a"]).await;
            let gw = start_gw(&yaml("anthropic", &mocks, price)).await;
            let response = send(&gw, "/v1/messages", stream).await;
            assert_eq!(response.status(), 200);
            let _ = response.text().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let rows = requests(&gw).await;
            assert_eq!(rows[0]["prompt_tokens"], PROMPT_TOKENS, "{}", rows[0]);
            assert_eq!(rows[0]["cached_tokens"], CACHED_TOKENS, "{}", rows[0]);
            assert_eq!(
                account(&gw).await["charged_micro"],
                want,
                "{price} stream={stream}"
            );
            gw.stop().await;
        }
    }
}

/// R11.1: a client that goes away before its answer gets its precharge back at once — the
/// balance is whole again while the gateway runs, not only after a restart.
#[tokio::test]
async fn precharge_is_refunded_when_the_client_leaves() {
    for (stream, h2) in [(false, false), (true, false), (false, true), (true, true)] {
        let mocks = mocks(&["a"]).await;
        let gw = start_gw(&yaml("openai", &mocks, "{input: 1000, output: 2000}")).await;
        mocks["a"].set_default(Behavior::HangBeforeHeaders(Duration::from_secs(5)));
        let mut quick = reqwest::Client::builder().timeout(Duration::from_millis(300));
        if h2 {
            quick = quick.http2_prior_knowledge();
        }
        let quick = quick.build().unwrap();
        let sent = quick
            .post(format!("{}/v1/chat/completions", gw.base))
            .bearer_auth(ALICE)
            .json(&body_for("/v1/chat/completions", stream))
            .send()
            .await;
        assert!(sent.is_err(), "the client gave up");
        let started = Instant::now();
        let mut latest = account(&gw).await;
        while latest["charged_micro"] != 0 && started.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            latest = account(&gw).await;
        }
        assert_eq!(
            latest["charged_micro"], 0,
            "stream={stream} h2={h2}: {latest}"
        );
        assert!(latest["refunded_micro"].as_i64().unwrap() > 0, "{latest}");
        gw.stop().await;
    }
}
