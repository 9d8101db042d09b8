//! Helpers shared by the streaming and stream-policy tests: a two-channel gateway of one
//! kind, request bodies per endpoint, and the request log.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::*;

pub const FAST: &str = "timeouts:\n  first_byte: 300ms\n  keepalive: 100ms\n";

/// Channel `name` of `kind` serving model `m`, with extra indented lines.
pub fn ch(name: &str, kind: &str, priority: i64, extra: &str) -> String {
    format!(
        "  {name}:\n    kind: {kind}\n    base_url: {{{name}}}\n    keys: [\"sk-up-{name}\"]\n    models: [m]\n    priority: {priority}\n{extra}"
    )
}

/// Gateway with channels `a` (priority 10, tried first) and `b` (priority 0) of `kind`.
pub async fn pair(kind: &str, a_extra: &str) -> (Gw, HashMap<String, MockUpstream>) {
    let mocks = mocks(&["a", "b"]).await;
    let yaml = fill(
        &format!(
            "{FAST}channels:\n{}{}{CLIENTS}",
            ch("a", kind, 10, a_extra),
            ch("b", kind, 0, "")
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

pub fn body_for(path: &str, stream: bool) -> Value {
    match path {
        "/v1/messages" => {
            json!({"model": "m", "max_tokens": 10, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
        }
        "/v1/responses" => json!({"model": "m", "stream": stream, "input": "hi"}),
        _ => {
            json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
        }
    }
}

/// `data:` payloads of an SSE text, in order.
pub fn data_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect()
}

/// The content deltas of a Chat Completions SSE text, in order (empty ones left out).
pub fn chat_contents(text: &str) -> Vec<String> {
    data_lines(text)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .filter(|c| !c.is_empty())
        .collect()
}

pub async fn send(gw: &Gw, path: &str, stream: bool) -> reqwest::Response {
    gw.post(path, ALICE, body_for(path, stream)).await
}

/// The newest request-log rows after the writer flushed.
pub async fn requests(gw: &Gw) -> Vec<Value> {
    gw.flush().await;
    let (s, v) = gw.admin_get("/admin/requests?limit=10").await;
    assert_eq!(s, 200);
    v["requests"].as_array().cloned().unwrap_or_default()
}
