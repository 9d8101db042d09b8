//! The mock refuses what the real providers refuse (PROVIDERS.md), with their status and
//! error bodies: OpenAI Chat Completions and Responses, Anthropic Messages and token
//! counting, Gemini, an OpenAI-compatible chat-only server and DeepSeek's thinking mode.
use serde_json::{json, Value};
use switchyard_mock::{Behavior, Flavour, MockUpstream, THOUGHT};

use super::{client, data_lines};

/// POSTs `body` (as given, not completed) with optional headers; returns status and JSON.
async fn send(
    mock: &MockUpstream,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let mut req = client()
        .post(format!("http://{}{path}", mock.addr()))
        .json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn call(id: &str) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
        "function": {"name": "bash", "arguments": "{}"}}]})
}

fn tool(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "ok"})
}

async fn chat(mock: &MockUpstream, body: Value) -> (u16, Value) {
    send(mock, "/v1/chat/completions", &[], body).await
}

#[tokio::test]
async fn openai_refuses_unknown_fields_with_its_error_object() {
    let mock = MockUpstream::start().await.unwrap();
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi")], "context_management": {}}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(
        v,
        json!({"error": {"message": "Unrecognized request argument supplied: context_management",
            "type": "invalid_request_error", "param": null, "code": null}})
    );
    assert_eq!(mock.refused().len(), 1);
    let (s, _) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi")], "max_tokens": 5}),
    )
    .await;
    assert_eq!(s, 200, "max_tokens is fine on a non-reasoning model");
    assert_eq!(mock.refused().len(), 1);
    let (s, v) = chat(&mock, json!({"model": "gpt-4o"})).await;
    assert_eq!(
        (s, v["error"]["code"].clone()),
        (400, json!("missing_required_parameter"))
    );
}

#[tokio::test]
async fn reasoning_models_refuse_max_tokens_and_temperature() {
    let mock = MockUpstream::start().await.unwrap();
    for model in ["gpt-5.4", "o3-mini", "o1", "gpt-5"] {
        let (s, v) = chat(
            &mock,
            json!({"model": model, "messages": [user("hi")], "max_tokens": 5}),
        )
        .await;
        assert_eq!(s, 400, "{model}");
        assert_eq!(v["error"]["param"], "max_tokens");
        assert_eq!(v["error"]["code"], "unsupported_parameter");
        assert_eq!(
            v["error"]["message"],
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        );
        let ok = json!({"model": model, "messages": [user("hi")], "max_completion_tokens": 5});
        assert_eq!(chat(&mock, ok).await.0, 200, "{model}");
    }
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-5.4", "messages": [user("hi")], "temperature": 0}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["param"].clone()),
        (400, json!("temperature"))
    );
    // A name that only starts like a family is not one.
    let (s, _) = chat(
        &mock,
        json!({"model": "o1x", "messages": [user("hi")], "max_tokens": 5}),
    )
    .await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn openai_limits_user_and_tool_call_ids() {
    let mock = MockUpstream::start().await.unwrap();
    let long = "u".repeat(65);
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi")], "user": long}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["param"], "user");
    assert_eq!(v["error"]["code"], "string_above_max_length");
    let ok = json!({"model": "gpt-4o", "messages": [user("hi")], "user": "u".repeat(64)});
    assert_eq!(chat(&mock, ok).await.0, 200);
    let id = "c".repeat(41);
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi"), call(&id), tool(&id)]}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["param"], "messages[1].tool_calls[0].id");
}

#[tokio::test]
async fn openai_tool_messages_answer_the_calls_right_before_them() {
    let mock = MockUpstream::start().await.unwrap();
    let ok = json!({"model": "gpt-4o", "messages": [user("hi"), call("call_1"), tool("call_1"), user("next")]});
    assert_eq!(chat(&mock, ok).await.0, 200);
    // A tool message with no call before it.
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi"), tool("call_1")]}),
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("must be a response to a preceeding message with 'tool_calls'"),
        "{v}"
    );
    // A user message between the call and its answer.
    let body = json!({"model": "gpt-4o", "messages": [user("hi"), call("call_1"), user("x"), tool("call_1")]});
    assert_eq!(chat(&mock, body).await.0, 400);
    // A call never answered.
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi"), call("call_1"), user("x")]}),
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("did not have response messages: call_1"),
        "{v}"
    );
    // An image in a tool message.
    let img = json!({"role": "tool", "tool_call_id": "call_1", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]});
    let (s, v) = chat(
        &mock,
        json!({"model": "gpt-4o", "messages": [user("hi"), call("call_1"), img]}),
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Image URLs are only allowed for messages with role 'user'"),
        "{v}"
    );
    // An Anthropic block type inside an OpenAI message.
    let bad = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]});
    let (s, v) = chat(&mock, json!({"model": "gpt-4o", "messages": [bad]})).await;
    assert_eq!(
        (s, v["error"]["param"].clone()),
        (400, json!("messages[0].content[0].type"))
    );
}

#[tokio::test]
async fn responses_refuses_unknown_parameters() {
    let mock = MockUpstream::start().await.unwrap();
    let (s, v) = send(
        &mock,
        "/v1/responses",
        &[],
        json!({"model": "gpt-5", "input": "hi", "max_tokens": 5}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["message"], "Unknown parameter: 'max_tokens'.");
    assert_eq!(v["error"]["code"], "unknown_parameter");
    let ok =
        json!({"model": "gpt-5", "input": "hi", "client_metadata": {"a": "b"}, "store": false});
    assert_eq!(send(&mock, "/v1/responses", &[], ok).await.0, 200);
}

fn messages_body(extra: Value) -> Value {
    let mut body = json!({"model": "claude-x", "max_tokens": 100, "messages": [user("hi")]});
    if let (Some(b), Value::Object(e)) = (body.as_object_mut(), extra) {
        b.extend(e);
    }
    body
}

async fn anthropic(mock: &MockUpstream, beta: &str, body: Value) -> (u16, Value) {
    let headers = [
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", beta),
    ];
    send(mock, "/v1/messages", &headers, body).await
}

#[tokio::test]
async fn anthropic_refuses_extra_inputs_and_beta_fields_without_their_beta() {
    let mock = MockUpstream::start().await.unwrap();
    let (s, v) = anthropic(&mock, "", messages_body(json!({"n": 2}))).await;
    assert_eq!(s, 400);
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "n: Extra inputs are not permitted"}})
    );
    let cm = json!({"context_management": {"edits": []}});
    let (s, v) = anthropic(&mock, "claude-code-20250219", messages_body(cm.clone())).await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (
            400,
            json!("context_management: Extra inputs are not permitted")
        )
    );
    assert_eq!(
        anthropic(&mock, "context-management-2025-06-27", messages_body(cm))
            .await
            .0,
        200
    );
    let (s, v) = anthropic(
        &mock,
        "",
        json!({"model": "claude-x", "messages": [user("hi")]}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (400, json!("max_tokens: Field required"))
    );
    let meta = json!({"metadata": {"user_id": "u", "session": "s"}});
    assert_eq!(anthropic(&mock, "", messages_body(meta)).await.0, 400);
    // OpenAI-format cache_control as a sibling of role is not an Anthropic field.
    let msgs = json!({"messages": [{"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}}]});
    let (s, v) = anthropic(&mock, "", messages_body(msgs)).await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (
            400,
            json!("messages.0.cache_control: Extra inputs are not permitted")
        )
    );
    let blocks = json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]});
    assert_eq!(anthropic(&mock, "", messages_body(blocks)).await.0, 200);
}

#[tokio::test]
async fn anthropic_system_role_needs_the_mid_conversation_beta() {
    let mock = MockUpstream::start().await.unwrap();
    let msgs =
        json!({"messages": [user("hi"), {"role": "system", "content": "be brief"}, user("again")]});
    let (s, v) = anthropic(&mock, "claude-code-20250219", messages_body(msgs.clone())).await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (
            400,
            json!("messages.1.role: Input should be 'user' or 'assistant'")
        )
    );
    let beta = "claude-code-20250219,mid-conversation-system-2026-04-07";
    assert_eq!(anthropic(&mock, beta, messages_body(msgs)).await.0, 200);
    // Runs of one role are merged, not refused.
    let runs = json!({"messages": [user("a"), user("b"), {"role": "assistant", "content": "c"}, user("d")]});
    assert_eq!(anthropic(&mock, "", messages_body(runs)).await.0, 200);
}

#[tokio::test]
async fn anthropic_thinking_needs_a_signature_and_tool_use_its_result() {
    let mock = MockUpstream::start().await.unwrap();
    let turn = |sig: &str| {
        json!({"messages": [user("hi"), {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": sig},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}]})
    };
    let (s, v) = anthropic(&mock, "", messages_body(turn(""))).await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (
            400,
            json!("messages.1.content.0: Invalid `signature` in `thinking` block")
        )
    );
    assert_eq!(
        anthropic(&mock, "", messages_body(turn("EqQBCgIYAhIMzkH8Yw==")))
            .await
            .0,
        200
    );
    let unanswered = json!({"messages": [user("hi"), {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}, user("and?")]});
    let (s, v) = anthropic(&mock, "", messages_body(unanswered)).await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains(
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1"
        ),
        "{v}"
    );
    let stray = json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "ok"}]}]});
    let (s, v) = anthropic(&mock, "", messages_body(stray)).await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unexpected `tool_use_id`"),
        "{v}"
    );
    let budget =
        json!({"max_tokens": 1000, "thinking": {"type": "enabled", "budget_tokens": 2000}});
    assert_eq!(anthropic(&mock, "", messages_body(budget)).await.0, 400);
    let adaptive = json!({"thinking": {"type": "adaptive"}});
    assert_eq!(anthropic(&mock, "", messages_body(adaptive)).await.0, 200);
}

#[tokio::test]
async fn count_tokens_answers_in_anthropics_shape_and_validates() {
    let mock = MockUpstream::start().await.unwrap();
    let headers = [("anthropic-version", "2023-06-01")];
    let body = json!({"model": "claude-x", "messages": [user("foo")], "tools": []});
    let (s, v) = send(&mock, "/v1/messages/count_tokens", &headers, body).await;
    assert_eq!(
        (s, v),
        (200, json!({"input_tokens": switchyard_mock::PROMPT_TOKENS}))
    );
    let body = json!({"model": "claude-x", "messages": [user("foo")], "max_tokens": 1});
    let (s, v) = send(&mock, "/v1/messages/count_tokens", &headers, body).await;
    assert_eq!(
        (s, v["error"]["message"].clone()),
        (400, json!("max_tokens: Extra inputs are not permitted"))
    );
}

#[tokio::test]
async fn gemini_refuses_unknown_names_and_schema_keywords() {
    let mock = MockUpstream::start().await.unwrap();
    let path = "/v1beta/models/gemini-x:generateContent";
    let contents = json!([{"role": "user", "parts": [{"text": "hi"}]}]);
    let (s, v) = send(
        &mock,
        path,
        &[],
        json!({"contents": contents, "temperature": 0}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(
        v["error"]["message"],
        "Invalid JSON payload received. Unknown name \"temperature\": Cannot find field."
    );
    let params = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
    let tools = json!([{"functionDeclarations": [{"name": "f", "parameters": params}]}]);
    let (s, v) = send(
        &mock,
        path,
        &[],
        json!({"contents": contents, "tools": tools}),
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown name \"$schema\" at 'tools[0].function_declarations[0].parameters'"),
        "{v}"
    );
    let tools = json!([{"function_declarations": [{"name": "f", "parametersJsonSchema": params}]}]);
    let ok = json!({"contents": contents, "tools": tools, "generation_config": {"max_output_tokens": 5}});
    assert_eq!(send(&mock, path, &[], ok).await.0, 200);
    let bad_role = json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]});
    assert_eq!(send(&mock, path, &[], bad_role).await.0, 400);
}

#[tokio::test]
async fn chat_only_servers_have_no_responses_or_messages() {
    let mock = MockUpstream::start().await.unwrap();
    mock.set_flavour(Flavour::ChatOnly);
    for path in ["/v1/responses", "/v1/messages", "/v1/messages/count_tokens"] {
        let (s, v) = send(&mock, path, &[], json!({"model": "m", "input": "hi"})).await;
        assert_eq!((s, v), (404, json!({"detail": "Not Found"})), "{path}");
    }
    // max_tokens on any model, and the servers' own fields.
    let body = json!({"model": "gpt-5", "messages": [user("hi")], "max_tokens": 5, "top_k": 3});
    assert_eq!(chat(&mock, body).await.0, 200);
    assert_eq!(
        chat(
            &mock,
            json!({"model": "m", "messages": [user("hi")], "foo": 1})
        )
        .await
        .0,
        400
    );
}

#[tokio::test]
async fn deepseek_thinking_wants_its_reasoning_back_in_tool_loops() {
    let mock = MockUpstream::start().await.unwrap();
    mock.set_flavour(Flavour::DeepseekThinking);
    let (s, v) = chat(&mock, json!({"model": "deepseek-reasoner", "messages": [user("hi"), call("call_1"), tool("call_1")]})).await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().starts_with(
            "Missing `reasoning_content` field in the assistant message at message index 1"
        ),
        "{v}"
    );
    let mut with = call("call_1");
    with["reasoning_content"] = json!(THOUGHT);
    let body =
        json!({"model": "deepseek-reasoner", "messages": [user("hi"), with, tool("call_1")]});
    let (s, v) = chat(&mock, body).await;
    assert_eq!(s, 200);
    assert_eq!(v["choices"][0]["message"]["reasoning_content"], THOUGHT);
    // Before the last user message the reasoning may be gone; thinking off needs none.
    let older = json!({"model": "deepseek-reasoner", "messages": [user("hi"), call("call_1"), tool("call_1"), user("next")]});
    assert_eq!(chat(&mock, older).await.0, 200);
    let off = json!({"model": "deepseek-reasoner", "thinking": {"type": "disabled"},
        "messages": [user("hi"), call("call_1"), tool("call_1")]});
    assert_eq!(chat(&mock, off).await.0, 200);
    let response = client()
        .post(format!("{}/chat/completions", mock.base_url()))
        .json(&json!({"model": "deepseek-reasoner", "stream": true, "messages": [user("hi")]}))
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let first: Value = serde_json::from_str(data_lines(&text)[1]).unwrap();
    assert_eq!(
        first["choices"][0]["delta"]["reasoning_content"], THOUGHT,
        "{text}"
    );
}

#[tokio::test]
async fn front_end_faults_come_first_and_validation_can_be_turned_off() {
    let mock = MockUpstream::start().await.unwrap();
    mock.push(Behavior::Status {
        code: 529,
        body: None,
    });
    let (s, _) = send(&mock, "/v1/messages", &[], json!({"junk": true})).await;
    assert_eq!(s, 529, "an overloaded front end answers before validation");
    let (s, _) = send(&mock, "/v1/messages", &[], json!({"junk": true})).await;
    assert_eq!(s, 400);
    let reqs = mock.requests();
    assert!(
        reqs.iter().all(|r| r.refusal.is_some()),
        "both recorded as invalid"
    );
    mock.set_validate(false);
    let (s, _) = send(&mock, "/v1/messages", &[], json!({"junk": true})).await;
    assert_eq!(s, 200);
}
