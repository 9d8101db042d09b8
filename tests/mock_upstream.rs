//! Tests of the mock upstream over real sockets: endpoints, stream formats, every fault
//! behaviour, key checks, counters, `x-mock-fault` and shutdown.
use std::time::Duration;

use serde_json::{json, Value};
use switchyard_mock::{
    Behavior, MockUpstream, CACHED_TOKENS, CACHE_WRITE_TOKENS, DEFAULT_CHUNKS, PROMPT_TOKENS,
};

#[path = "mock_upstream/faults.rs"]
mod faults;
#[path = "mock_upstream/script.rs"]
mod script;
#[path = "mock_upstream/validate.rs"]
mod validate;
#[path = "mock_upstream/wire.rs"]
mod wire;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `body` completed to a request the provider accepts (the mock validates as the provider
/// does): chat gets `model` and `messages`, messages also `max_tokens`, responses `model`.
/// Fields already given are kept.
fn valid(path: &str, mut body: Value) -> Value {
    let defaults = match path {
        "chat/completions" => {
            json!({"model": "mock-model", "messages": [{"role": "user", "content": "hi"}]})
        }
        "messages" => json!({"model": "mock-model", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}]}),
        "responses" => json!({"model": "mock-model"}),
        _ => json!({}),
    };
    if let (Some(b), Value::Object(d)) = (body.as_object_mut(), defaults) {
        for (k, v) in d {
            b.entry(k).or_insert(v);
        }
    }
    body
}

async fn post(mock: &MockUpstream, path: &str, body: Value) -> reqwest::Response {
    client()
        .post(format!("{}/{path}", mock.base_url()))
        .json(&valid(path, body))
        .send()
        .await
        .unwrap()
}

async fn post_fault(
    mock: &MockUpstream,
    path: &str,
    body: Value,
    fault: &str,
) -> reqwest::Response {
    client()
        .post(format!("{}/{path}", mock.base_url()))
        .header("x-mock-fault", fault)
        .json(&valid(path, body))
        .send()
        .await
        .unwrap()
}

pub use crate::support::streams::{chat_contents, data_lines};

fn event_names(body: &str) -> Vec<&str> {
    body.lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect()
}

async fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    for _ in 0..150 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    condition()
}

#[tokio::test]
async fn chat_non_stream_echoes_model_with_usage() {
    let mock = MockUpstream::start().await.unwrap();
    assert!(mock.base_url().starts_with("http://127.0.0.1:"));
    assert!(mock.base_url().ends_with("/v1"));
    let response = post(
        &mock,
        "chat/completions",
        json!({"model": "gpt-x", "messages": []}),
    )
    .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "gpt-x");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "chunk 0 chunk 1 chunk 2 "
    );
    assert_eq!(body["usage"]["prompt_tokens"], PROMPT_TOKENS);
    assert_eq!(body["usage"]["completion_tokens"], DEFAULT_CHUNKS as u64);
    assert_eq!(
        body["usage"]["prompt_tokens_details"]["cached_tokens"],
        CACHED_TOKENS
    );
}

#[tokio::test]
async fn chat_stream_ends_with_done_and_usage_only_when_asked() {
    let mock = MockUpstream::start().await.unwrap();
    let body = json!({"model": "m1", "stream": true, "stream_options": {"include_usage": true}});
    let response = post(&mock, "chat/completions", body).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let data = data_lines(&text);
    assert_eq!(*data.last().unwrap(), "[DONE]");
    let usage: Value = serde_json::from_str(data[data.len() - 2]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    let stop: Value = serde_json::from_str(data[data.len() - 3]).unwrap();
    assert_eq!(stop["choices"][0]["finish_reason"], "stop");
    assert_eq!(chat_contents(&text).concat(), "chunk 0 chunk 1 chunk 2 ");
    assert!(text.contains("\"model\":\"m1\""));

    let text = post(&mock, "chat/completions", json!({"stream": true}))
        .await
        .text()
        .await
        .unwrap();
    assert!(!text.contains("\"usage\""));
    assert_eq!(*data_lines(&text).last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn anthropic_messages_formats() {
    let mock = MockUpstream::start().await.unwrap();
    let body: Value = post(
        &mock,
        "messages",
        json!({"model": "claude-x", "max_tokens": 5}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(body["type"], "message");
    assert_eq!(body["model"], "claude-x");
    // Anthropic's convention: input_tokens excludes the cache reads and writes.
    assert_eq!(
        body["usage"]["input_tokens"],
        PROMPT_TOKENS - CACHED_TOKENS - CACHE_WRITE_TOKENS
    );
    assert_eq!(body["usage"]["output_tokens"], 3);
    assert_eq!(body["usage"]["cache_read_input_tokens"], CACHED_TOKENS);
    assert_eq!(
        body["usage"]["cache_creation_input_tokens"],
        CACHE_WRITE_TOKENS
    );

    let response = post(
        &mock,
        "messages",
        json!({"model": "claude-x", "stream": true}),
    )
    .await;
    let text = response.text().await.unwrap();
    let names = event_names(&text);
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names[1], "content_block_start");
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "content_block_delta")
            .count(),
        3
    );
    assert_eq!(
        &names[names.len() - 3..],
        &["content_block_stop", "message_delta", "message_stop"]
    );
    let delta: Value = serde_json::from_str(data_lines(&text)[names.len() - 2]).unwrap();
    assert_eq!(delta["usage"]["output_tokens"], 3);
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");

    let response = post_fault(&mock, "messages", json!({}), "status=529").await;
    assert_eq!(response.status(), 529);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn responses_api_formats() {
    let mock = MockUpstream::start().await.unwrap();
    let body: Value = post(&mock, "responses", json!({"model": "r1", "input": "hi"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["model"], "r1");
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        "chunk 0 chunk 1 chunk 2 "
    );
    assert_eq!(body["usage"]["output_tokens"], 3);
    let text = post(&mock, "responses", json!({"model": "r1", "stream": true}))
        .await
        .text()
        .await
        .unwrap();
    let names = event_names(&text);
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "response.output_text.delta")
            .count(),
        3
    );
    let done: Value = serde_json::from_str(data_lines(&text).last().unwrap()).unwrap();
    assert_eq!(done["response"]["usage"]["input_tokens"], PROMPT_TOKENS);
}

#[tokio::test]
async fn other_endpoints_answer() {
    let mock = MockUpstream::start().await.unwrap();
    let body: Value = post(&mock, "completions", json!({"model": "c1", "prompt": "x"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["model"].clone(), body["object"].clone()),
        (json!("c1"), json!("text_completion"))
    );
    let text = post(&mock, "completions", json!({"stream": true}))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(*data_lines(&text).last().unwrap(), "[DONE]");
    let body: Value = post(
        &mock,
        "embeddings",
        json!({"model": "e", "input": ["a", "b"]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(body["model"], "e");
    let body: Value = post(&mock, "moderations", json!({"input": "x"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["results"][0]["flagged"], false);
    let body: Value = post(&mock, "images/generations", json!({"model": "img"}))
        .await
        .json()
        .await
        .unwrap();
    assert!(body["data"][0]["url"].is_string());
    let response = post(&mock, "audio/speech", json!({"model": "tts"})).await;
    assert_eq!(response.headers()["content-type"], "audio/mpeg");
    assert!(!response.bytes().await.unwrap().is_empty());
    let multipart =
        "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-9\r\n--b--\r\n";
    let body: Value = client()
        .post(format!("{}/audio/transcriptions", mock.base_url()))
        .header("content-type", "multipart/form-data; boundary=b")
        .body(multipart)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["text"].is_string(), body["model"].clone()),
        (true, json!("whisper-9"))
    );
    let body: Value = client()
        .get(format!("{}/models", mock.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["id"].as_str())
        .collect();
    assert!(ids.contains(&"mock-model") && ids.contains(&"whisper-9") && ids.contains(&"c1"));
    let body: Value = post(&mock, "videos", json!({"model": "vid"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["id"].clone(), body["status"].clone()),
        (json!("task_1"), json!("queued"))
    );
    let body: Value = client()
        .get(format!("{}/videos/task_1", mock.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (body["id"].clone(), body["status"].clone()),
        (json!("task_1"), json!("completed"))
    );
    let body: Value = client()
        .delete(format!("{}/custom/thing?x=1", mock.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        body,
        json!({"path": "/v1/custom/thing?x=1", "method": "DELETE"})
    );
    let response = client()
        .get(format!("http://{}/other", mock.addr()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn status_default_and_custom_bodies() {
    let mock = MockUpstream::start().await.unwrap();
    mock.push(Behavior::Status {
        code: 503,
        body: None,
    });
    mock.push(Behavior::Status {
        code: 400,
        body: Some("{\"x\":1}".into()),
    });
    let response = post(&mock, "chat/completions", json!({})).await;
    assert_eq!(response.status(), 503);
    let json: Value = response.json().await.unwrap();
    assert!(json["error"]["message"].is_string());
    let response = post(&mock, "chat/completions", json!({})).await;
    assert_eq!(response.status(), 400);
    assert_eq!(response.text().await.unwrap(), "{\"x\":1}");
    // Queue drained: back to the default.
    assert_eq!(
        post(&mock, "chat/completions", json!({})).await.status(),
        200
    );
    mock.set_default(Behavior::Status {
        code: 429,
        body: None,
    });
    assert_eq!(
        post(&mock, "chat/completions", json!({})).await.status(),
        429
    );
    assert_eq!(
        post(&mock, "chat/completions", json!({})).await.status(),
        429
    );
}
