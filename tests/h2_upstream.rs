//! `channels.*.protocol: http2` under load (B-upstream-h2): an upstream that caps concurrent
//! streams per connection, as real HTTP/2 providers do, gets 500 concurrent streams from one
//! channel without a request waiting for a stream slot or failing over.
use crate::support;

use std::time::Duration;

use futures_util::future::join_all;
use support::streams::*;
use support::*;
use switchyard_mock::MAX_CONCURRENT_STREAMS;

const STREAMS: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_streams_to_one_http2_host_neither_queue_nor_fail() {
    assert!(STREAMS > 4 * MAX_CONCURRENT_STREAMS as usize);
    let mocks = mocks(&["a", "b"]).await;
    for up in mocks.values() {
        up.set_record(true);
    }
    // Each stream lasts about 3 s; one waiting behind a full connection would miss the 2 s
    // header gate and fail over to b.
    mocks["a"].set_default("stream=10:300ms".parse().unwrap());
    let yaml = fill(
        &format!(
            "timeouts:\n  upstream_header: 2s\nlimits:\n  max_connections: 4096\nchannels:\n{}    protocol: http2\n{}{CLIENTS}",
            ch("a", "openai", 10, ""),
            ch("b", "openai", 0, "")
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(STREAMS)
        .build()
        .unwrap();
    let calls = (0..STREAMS).map(|_| {
        let client = client.clone();
        let url = format!("{}/v1/chat/completions", gw.base);
        async move {
            let response = client
                .post(url)
                .bearer_auth(ALICE)
                .json(&body_for("/v1/chat/completions", true))
                .send()
                .await
                .expect("sent");
            let chain = route(&response);
            let text = response.text().await.unwrap_or_default();
            (chain, text)
        }
    });
    let results = join_all(calls).await;
    for (chain, text) in &results {
        assert_eq!(chain, "a");
        assert!(
            text.contains("data: [DONE]") && !text.contains("error"),
            "{text}"
        );
    }
    assert_eq!(mocks["b"].calls(), 0);
    // Every stream was in flight at once: none waited for another to end.
    let arrived: Vec<_> = mocks["a"].requests().iter().map(|r| r.arrived_at).collect();
    assert_eq!(arrived.len(), STREAMS);
    let first = arrived.iter().min().copied().unwrap();
    let last = arrived.iter().max().copied().unwrap();
    assert!(
        last - first < Duration::from_millis(2500),
        "{:?}",
        last - first
    );
    gw.stop().await;
}
