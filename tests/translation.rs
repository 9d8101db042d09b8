//! End-to-end wire-format translation (R16.1) through the real gateway and mock
//! upstreams speaking each provider's format: an OpenAI client on Anthropic, Gemini and Azure
//! channels, an Anthropic client on an OpenAI channel, errors mapped into the caller's shape,
//! refused fields, `translate: false`, and the request log's `openai->anthropic`.
use crate::support;

use serde_json::{json, Value};
use support::*;
use switchyard_mock::{DEFAULT_CHUNKS, PROMPT_TOKENS};

/// "chunk 0 chunk 1 chunk 2 ": the mock's text for its default answer.
fn mock_text() -> String {
    (0..DEFAULT_CHUNKS).map(|i| format!("chunk {i} ")).collect()
}

/// One channel `up` of `kind` (extra lines appended) serving `model`; `base` replaces the
/// mock's `/v1` base URL when given.
async fn one(kind: &str, model: &str, extra: &str, base: Option<&str>) -> (Gw, MockUpstream) {
    let mock = MockUpstream::start().await.unwrap();
    mock.set_record(true);
    let url = match base {
        Some(suffix) => format!("http://{}{suffix}", mock.addr()),
        None => mock.base_url(),
    };
    let yaml = format!(
        "routing:\n  retry_times: 0\nchannels:\n  up:\n    kind: {kind}\n    base_url: {url}\n    keys: [\"sk-up\"]\n    models: [{model}]\n{extra}{CLIENTS}"
    );
    (start_gw(&yaml).await, mock)
}

fn openai_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"}]})
}

fn anthropic_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 100, "stream": stream, "system": "be brief",
        "messages": [{"role": "user", "content": "hi"}]})
}

async fn anthropic_post(gw: &Gw, body: Value) -> reqwest::Response {
    gw.http
        .post(format!("{}/v1/messages", gw.base))
        .header("x-api-key", ALICE)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "tools-2024-05-16")
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The `data:` payloads of an SSE body, parsed (`[DONE]` as a string).
fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap_or(Value::String(d.to_string())))
        .collect()
}

/// The last request's attempts in the request log.
async fn attempts(gw: &Gw) -> Vec<Value> {
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=1").await;
    log["requests"][0]["attempts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn openai_client_on_anthropic_channel() {
    let (gw, m) = one("anthropic", "claude-x", "", None).await;
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            openai_body("claude-x", false),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion", "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], mock_text());
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"]["prompt_tokens"], PROMPT_TOKENS,
        "all input counted: {body}"
    );
    assert_eq!(body["usage"]["completion_tokens"], DEFAULT_CHUNKS);
    let req = &m.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-up"));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert!(req.header("authorization").is_none());
    let sent = req.json().unwrap();
    assert_eq!(sent["system"], "be brief", "{sent}");
    assert_eq!(sent["max_tokens"], 8192, "the documented default: {sent}");
    assert_eq!(sent["messages"], json!([{"role": "user", "content": "hi"}]));
    let attempts = attempts(&gw).await;
    assert_eq!(
        attempts[0]["translation"], "openai->anthropic",
        "{attempts:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn openai_stream_on_anthropic_channel_with_and_without_usage() {
    let (gw, m) = one("anthropic", "claude-x", "", None).await;
    for include in [false, true] {
        let mut body = openai_body("claude-x", true);
        if include {
            body["stream_options"] = json!({"include_usage": true});
        }
        let response = gw.post("/v1/chat/completions", ALICE, body).await;
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        let evs = events(&text);
        let content: String = evs
            .iter()
            .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(content, mock_text(), "{text}");
        assert_eq!(evs.last(), Some(&json!("[DONE]")), "{text}");
        assert!(evs
            .iter()
            .all(|e| e.get("object").is_none_or(|o| o == "chat.completion.chunk")));
        let usage: Vec<&Value> = evs.iter().filter(|e| e["usage"].is_object()).collect();
        match include {
            false => assert!(usage.is_empty(), "not asked for: {text}"),
            true => assert_eq!(
                usage[0]["usage"]["completion_tokens"], DEFAULT_CHUNKS,
                "{text}"
            ),
        }
    }
    assert_eq!(m.requests()[0].json().unwrap()["stream"], true);
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=2").await;
    for r in log["requests"].as_array().unwrap() {
        assert_eq!(r["completion_tokens"], DEFAULT_CHUNKS, "billed usage: {r}");
        assert_eq!(r["prompt_tokens"], PROMPT_TOKENS, "{r}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn anthropic_client_on_openai_channel() {
    let (gw, m) = one("openai", "gpt-x", "", None).await;
    let response = anthropic_post(&gw, anthropic_body("gpt-x", false)).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "message", "{body}");
    assert_eq!(body["content"][0]["text"], mock_text());
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(body["usage"]["output_tokens"], DEFAULT_CHUNKS);
    let req = &m.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-up"));
    assert!(
        req.header("anthropic-version").is_none(),
        "dropped for OpenAI"
    );
    assert!(req.header("anthropic-beta").is_none());
    let sent = req.json().unwrap();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    // `max_tokens_field: auto` on an OpenAI-compatible host and a non-OpenAI model family.
    assert_eq!(sent["max_tokens"], 100, "{sent}");
    assert!(sent.get("max_completion_tokens").is_none(), "{sent}");

    let response = anthropic_post(&gw, anthropic_body("gpt-x", true)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(names.first(), Some(&"message_start"), "{text}");
    assert_eq!(names.last(), Some(&"message_stop"), "{text}");
    let deltas: String = events(&text)
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert_eq!(deltas, mock_text());
    let sent = m.requests()[1].json().unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true, "{sent}");
    let attempts = attempts(&gw).await;
    assert_eq!(attempts[0]["translation"], "anthropic->openai");
    let (_, log) = gw.admin_get("/admin/requests?limit=1").await;
    let rec = &log["requests"][0];
    assert_eq!(
        (&rec["prompt_tokens"], &rec["completion_tokens"]),
        (&json!(PROMPT_TOKENS), &json!(DEFAULT_CHUNKS)),
        "the translated stream's usage is billed: {rec}"
    );
    gw.stop().await;
}

/// Upstream errors reach the client in its own shape, status and type mapped; the request
/// never reaches the upstream when a field cannot be expressed.
#[tokio::test]
async fn errors_are_mapped_and_untranslatable_fields_refused() {
    let (gw, m) = one("anthropic", "claude-x", "", None).await;
    for (code, status, kind) in [
        (529, 503, "overloaded_error"),
        (400, 400, "invalid_request_error"),
        (429, 429, "rate_limit_error"),
    ] {
        m.push(Behavior::Status { code, body: None });
        let response = gw
            .post(
                "/v1/chat/completions",
                ALICE,
                openai_body("claude-x", false),
            )
            .await;
        assert_eq!(response.status(), status, "upstream {code}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], kind, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("mock upstream error"),
            "{body}"
        );
        assert!(
            body.get("type").is_none(),
            "OpenAI shape, not Anthropic's: {body}"
        );
    }
    let calls = m.calls();
    let mut body = openai_body("claude-x", false);
    body["n"] = json!(2);
    let response = gw.post("/v1/chat/completions", ALICE, body).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"].as_str().unwrap().contains("`n`"),
        "{body}"
    );
    assert_eq!(body["error"]["code"], "untranslatable_field");
    assert_eq!(m.calls(), calls, "no attempt made");
    gw.stop().await;
}

#[tokio::test]
async fn openai_client_on_gemini_channel() {
    let (gw, m) = one("gemini", "gemini-x", "", Some("/v1beta")).await;
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            openai_body("gemini-x", false),
        )
        .await;
    assert_eq!(response.status(), 200);
    let json: Value = response.json().await.unwrap();
    assert_eq!(
        json["choices"][0]["message"]["content"],
        mock_text(),
        "{json}"
    );
    assert_eq!(json["usage"]["completion_tokens"], DEFAULT_CHUNKS);
    let req = &m.requests()[0];
    assert_eq!(req.path, "/v1beta/models/gemini-x:generateContent");
    assert_eq!(req.header("x-goog-api-key"), Some("sk-up"));
    let sent = req.json().unwrap();
    assert_eq!(
        sent["systemInstruction"]["parts"][0]["text"], "be brief",
        "{sent}"
    );

    let mut body = openai_body("gemini-x", true);
    body["stream_options"] = json!({"include_usage": true});
    let response = gw.post("/v1/chat/completions", ALICE, body).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let evs = events(&text);
    let content: String = evs
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, mock_text(), "{text}");
    assert_eq!(evs.last(), Some(&json!("[DONE]")));
    assert_eq!(
        m.requests()[1].path,
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    );
    // A Gemini error reaches an Anthropic client as Anthropic's.
    m.push(Behavior::Status {
        code: 429,
        body: None,
    });
    let response = anthropic_post(&gw, anthropic_body("gemini-x", false)).await;
    assert_eq!(response.status(), 429);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        (&body["type"], &body["error"]["type"]),
        (&json!("error"), &json!("rate_limit_error"))
    );
    gw.stop().await;
}

#[tokio::test]
async fn azure_channel_uses_deployment_paths() {
    let extra = "    api_version: \"2024-10-21\"\n    model_mapping: {gpt-4o: gpt4o-prod}\n";
    let (gw, m) = one("azure", "gpt-4o", extra, Some("")).await;
    let response = gw
        .post("/v1/chat/completions", ALICE, openai_body("gpt-4o", false))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], mock_text());
    let req = &m.requests()[0];
    assert_eq!(
        req.path,
        "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(req.header("api-key"), Some("sk-up"));
    assert!(req.header("authorization").is_none());
    // An Anthropic client reaches the same deployment, translated.
    let response = anthropic_post(&gw, anthropic_body("gpt-4o", true)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("event: message_stop"), "{text}");
    assert!(m.requests()[1]
        .path
        .starts_with("/openai/deployments/gpt4o-prod/chat/completions?"));
    assert_eq!(attempts(&gw).await[0]["translation"], "anthropic->openai");
    gw.stop().await;
}

/// `translate: false` keeps a channel to its own format; token counting is never translated.
#[tokio::test]
async fn translate_false_and_count_tokens_stay_in_format() {
    let mocks = mocks(&["an", "oa"]).await;
    let yaml = fill(
        &format!(
            "channels:\n  an:\n    kind: anthropic\n    base_url: {{an}}\n    keys: [k]\n    models: [claude-x, only-claude]\n    translate: false\n{}{CLIENTS}",
            channel("oa", "{oa}", 0, &["claude-x"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for _ in 0..4 {
        let response = gw
            .post(
                "/v1/chat/completions",
                ALICE,
                openai_body("claude-x", false),
            )
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-mock-name"], "oa");
    }
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            openai_body("only-claude", false),
        )
        .await;
    assert_eq!(response.status(), 404, "not served in this format");
    assert_eq!(mocks["an"].calls(), 0);
    let response = anthropic_post(&gw, anthropic_body("only-claude", false)).await;
    assert_eq!(response.status(), 200, "its own format still is");
    let response = gw
        .http
        .post(format!("{}/v1/messages/count_tokens", gw.base))
        .header("x-api-key", ALICE)
        .json(&json!({"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(mocks["an"].calls_to("/v1/messages/count_tokens"), 1);
    assert_eq!(
        mocks["oa"].calls_to("/v1/messages/count_tokens"),
        0,
        "never translated"
    );
    gw.stop().await;
}
