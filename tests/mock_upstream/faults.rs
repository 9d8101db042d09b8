//! Fault behaviours of the mock upstream seen from a real client, plus keys, counters,
//! `x-mock-fault` parsing, h2c and shutdown.
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockUpstream};

use super::{chat_contents, client, data_lines, event_names, post, post_fault, valid, wait_until};

async fn sse(mock: &MockUpstream, path: &str, fault: &str) -> reqwest::Response {
    client()
        .post(format!("{}/{path}", mock.base_url()))
        .header("x-mock-fault", fault)
        .json(&valid(path, json!({"stream": true})))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn hang_delays_headers() {
    let mock = MockUpstream::start().await.unwrap();
    mock.push(Behavior::HangBeforeHeaders(Duration::from_millis(250)));
    let started = Instant::now();
    let response = post(&mock, "chat/completions", json!({})).await;
    assert!(
        started.elapsed() >= Duration::from_millis(240),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(response.status(), 200);
    assert!(response.json::<Value>().await.unwrap()["choices"].is_array());
}

#[tokio::test]
async fn stall_sends_headers_then_waits() {
    let mock = MockUpstream::start().await.unwrap();
    let started = Instant::now();
    let stream = sse(&mock, "chat/completions", "stall=300ms").await;
    let headers_at = started.elapsed();
    assert!(headers_at < Duration::from_millis(200), "{headers_at:?}");
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let text = stream.text().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(*data_lines(&text).last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn slow_body_and_stream_delays() {
    let mock = MockUpstream::start().await.unwrap();
    let started = Instant::now();
    let response = post_fault(&mock, "chat/completions", json!({}), "slow=200ms").await;
    assert!(started.elapsed() < Duration::from_millis(150));
    assert!(response.json::<Value>().await.unwrap()["choices"].is_array());
    assert!(started.elapsed() >= Duration::from_millis(190));

    let started = Instant::now();
    let text = sse(&mock, "chat/completions", "stream=6:40ms")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(190),
        "{:?}",
        started.elapsed()
    );
    let order = chat_contents(&text);
    let want: Vec<String> = (0..6).map(|i| format!("chunk {i} ")).collect();
    assert_eq!(order, want);
    assert_eq!(*data_lines(&text).last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn cut_is_an_error_but_eof_is_clean() {
    let mock = MockUpstream::start().await.unwrap();
    for path in ["chat/completions", "messages", "responses"] {
        let stream = sse(&mock, path, "cut=2").await;
        assert_eq!(stream.status(), 200);
        let mut body = stream.bytes_stream();
        let mut got = Vec::new();
        let mut failed = false;
        while let Some(item) = body.next().await {
            match item {
                Ok(b) => got.extend_from_slice(&b),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "{path}: cut stream must end with a client error");
        let text = String::from_utf8(got).unwrap();
        assert!(
            text.contains("chunk 1 ") && !text.contains("chunk 2 "),
            "{path}: {text}"
        );

        let stream = sse(&mock, path, "eof=2").await;
        let text = stream.text().await.expect("clean end of body");
        assert!(text.contains("chunk 1 ") && !text.contains("chunk 2 "));
        assert!(!text.contains("[DONE]") && !text.contains("message_stop"));
        assert!(!text.contains("response.completed"));
    }
}

#[tokio::test]
async fn keepalives_then_normal_stream() {
    let mock = MockUpstream::start().await.unwrap();
    let started = Instant::now();
    let text = sse(&mock, "messages", "keepalive=3:50ms")
        .await
        .text()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(140));
    assert!(text.starts_with(": keepalive\n\n: keepalive\n\n: keepalive\n\nevent: message_start"));
    assert_eq!(event_names(&text).last(), Some(&"message_stop"));
}

#[tokio::test]
async fn hidden_errors() {
    let mock = MockUpstream::start().await.unwrap();
    mock.push(Behavior::HiddenError { code: Some(429) });
    let response = post(&mock, "chat/completions", json!({})).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": {"code": 429, "message": body["error"]["message"]}})
    );
    let body: Value = post_fault(&mock, "chat/completions", json!({}), "hidden")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["error"]["code"], "server_error");
    let text = sse(&mock, "chat/completions", "hidden=500")
        .await
        .text()
        .await
        .unwrap();
    let first: Value = serde_json::from_str(data_lines(&text)[0]).unwrap();
    assert_eq!(first["error"]["code"], 500);
    let text = sse(&mock, "messages", "hidden=529")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(event_names(&text), vec!["error"]);
    assert!(text.contains("overloaded_error"));
}

#[tokio::test]
async fn empty_and_redirect() {
    let mock = MockUpstream::start().await.unwrap();
    let response = post_fault(&mock, "chat/completions", json!({}), "empty").await;
    assert_eq!(response.status(), 200);
    assert!(response.bytes().await.unwrap().is_empty());
    mock.push(Behavior::Redirect {
        location: "http://127.0.0.1:1/v1/x".into(),
    });
    let response = post(&mock, "chat/completions", json!({})).await;
    assert_eq!(response.status(), 307);
    assert_eq!(response.headers()["location"], "http://127.0.0.1:1/v1/x");
}

#[tokio::test]
async fn require_key_echoes_the_key_it_got() {
    let mock = MockUpstream::start().await.unwrap();
    mock.require_key(Some("sk-right".into()));
    let response = client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .bearer_auth("sk-wrong-canary")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "Incorrect API key provided: sk-wrong-canary"
    );
    assert_eq!(body["error"]["code"], "invalid_api_key");
    let response = client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .bearer_auth("sk-right")
        .json(&valid("chat/completions", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = client()
        .post(format!("{}/messages", mock.base_url()))
        .header("x-api-key", "sk-right")
        .json(&valid("messages", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(post(&mock, "messages", json!({})).await.status(), 401);
    mock.require_key(None);
    assert_eq!(post(&mock, "messages", json!({})).await.status(), 200);
}

#[tokio::test]
async fn counts_records_names_and_resets() {
    let mock = MockUpstream::start().await.unwrap();
    mock.set_name("up-a");
    let response = post(&mock, "chat/completions", json!({"model": "a"})).await;
    assert_eq!(response.headers()["x-mock-name"], "up-a");
    let response = post_fault(&mock, "embeddings", json!({}), "status=500").await;
    assert_eq!(response.headers()["x-mock-name"], "up-a");
    client()
        .get(format!("{}/models?x=1", mock.base_url()))
        .header("x-trace", "t1")
        .send()
        .await
        .unwrap();
    assert_eq!(mock.calls(), 3);
    assert_eq!(mock.calls_to("/v1/chat/completions"), 1);
    assert_eq!(mock.calls_to("embeddings"), 1);
    assert_eq!(mock.calls_to("/v1/models"), 1);
    assert_eq!(mock.calls_to("/v1/responses"), 0);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].json().unwrap()["model"], "a");
    assert_eq!(
        (reqs[2].method.as_str(), reqs[2].path.as_str()),
        ("GET", "/v1/models?x=1")
    );
    assert_eq!(reqs[2].header("X-Trace"), Some("t1"));
    assert!(reqs[0].arrived_at <= reqs[2].arrived_at);
    mock.reset();
    assert_eq!(
        (
            mock.calls(),
            mock.calls_to("embeddings"),
            mock.requests().len()
        ),
        (0, 0, 0)
    );
}

#[tokio::test]
async fn fault_header_overrides_queue_and_rejects_garbage() {
    let mock = MockUpstream::start().await.unwrap();
    mock.push(Behavior::Status {
        code: 502,
        body: None,
    });
    let response = post_fault(&mock, "chat/completions", json!({}), "status=418").await;
    assert_eq!(response.status(), 418);
    // The queued behaviour was not consumed by the overridden request.
    assert_eq!(
        post(&mock, "chat/completions", json!({})).await.status(),
        502
    );
    let response = post_fault(&mock, "chat/completions", json!({}), "explode=1").await;
    assert_eq!(response.status(), 400);

    let parsed: Vec<Behavior> = [
        "status=503",
        "hang=2s",
        "stall=2s",
        "stream=20:10ms",
        "cut=3",
    ]
    .iter()
    .chain(&[
        "eof=3",
        "keepalive=3:100ms",
        "hidden=429",
        "hidden",
        "empty",
        "slow=1s",
    ])
    .map(|s| s.parse().unwrap())
    .collect();
    let ms = Duration::from_millis;
    assert_eq!(
        parsed,
        vec![
            Behavior::Status {
                code: 503,
                body: None
            },
            Behavior::HangBeforeHeaders(ms(2000)),
            Behavior::StallAfterHeaders(ms(2000)),
            Behavior::Stream {
                chunks: 20,
                delay: ms(10)
            },
            Behavior::CutMidStream { after_chunks: 3 },
            Behavior::EndWithoutTerminal { chunks: 3 },
            Behavior::KeepaliveThenOk {
                keepalives: 3,
                interval: ms(100)
            },
            Behavior::HiddenError { code: Some(429) },
            Behavior::HiddenError { code: None },
            Behavior::EmptyOk,
            Behavior::SlowBody { delay: ms(1000) },
        ]
    );
    for bad in [
        "",
        "status",
        "status=abc",
        "stream=3",
        "hang=soon",
        "cut=-1",
    ] {
        assert!(bad.parse::<Behavior>().is_err(), "{bad:?} parsed");
    }
}

#[tokio::test]
async fn dropped_stream_counts_as_disconnect() {
    let mock = MockUpstream::start().await.unwrap();
    let stream = sse(&mock, "chat/completions", "stream=200:10ms").await;
    let mut body = stream.bytes_stream();
    body.next().await.unwrap().unwrap();
    assert_eq!(mock.open_streams(), 1);
    assert_eq!(mock.disconnects(), 0);
    drop(body);
    assert!(
        wait_until(|| mock.disconnects() == 1).await,
        "disconnect not seen"
    );
    assert!(wait_until(|| mock.open_streams() == 0).await);
    // A stream read to its end is not a disconnect.
    sse(&mock, "chat/completions", "stream=3:1ms")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(mock.disconnects(), 1);
}

#[tokio::test]
async fn serves_h2c() {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let mock = MockUpstream::start().await.unwrap();
    let h2c_client: Client<_, Full<bytes::Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let req = http::Request::post(format!("{}/chat/completions", mock.base_url()))
        .body(Full::new(bytes::Bytes::from(
            valid("chat/completions", json!({"model": "h2"})).to_string(),
        )))
        .unwrap();
    let response = h2c_client.request(req).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["model"], "h2");
}

#[tokio::test]
async fn shutdown_and_drop_stop_the_server() {
    let mock = MockUpstream::start().await.unwrap();
    let url = format!("{}/models", mock.base_url());
    assert!(client().get(&url).send().await.is_ok());
    mock.shutdown();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(reqwest::Client::new().get(&url).send().await.is_err());

    let m2 = MockUpstream::start().await.unwrap();
    let url = format!("{}/models", m2.base_url());
    let clone = m2.clone();
    drop(m2);
    assert!(
        client().get(&url).send().await.is_ok(),
        "a clone keeps it alive"
    );
    drop(clone);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(reqwest::Client::new().get(&url).send().await.is_err());
}
