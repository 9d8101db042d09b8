//! Requests: Responses → Chat Completions and → Messages field by field (from the two
//! references), the refusals and drops. Every recorded Codex request is translated to each
//! upstream format in `tests/responses.rs` (reading files is I/O, which `wire` never does).

use serde_json::{json, Value};

use super::super::super::{MaxTokensField, RequestOptions, TranslateErrorKind, WireFormat};
use super::super::{request_to, split, ResponsesRequest};

fn to(
    upstream: WireFormat,
    body: Value,
) -> Result<ResponsesRequest, super::super::super::TranslateError> {
    request_to(
        upstream,
        body.to_string().as_bytes(),
        &RequestOptions::new("up-model"),
    )
}

fn chat(body: Value) -> Value {
    let translated = to(WireFormat::OpenAi, body).expect("translates");
    serde_json::from_slice(&translated.body).expect("JSON")
}

fn messages(body: Value) -> Value {
    let translated = to(WireFormat::Anthropic, body).expect("translates");
    serde_json::from_slice(&translated.body).expect("JSON")
}

#[test]
fn a_string_input_with_instructions_and_sampling() {
    let openai = chat(json!({
        "model": "gpt-5", "instructions": "Be brief.", "input": "Hi",
        "max_output_tokens": 100, "temperature": 0.5, "top_p": 0.9,
        "reasoning": {"effort": "low", "summary": "auto"}, "user": "u1",
        "prompt_cache_key": "sess-1", "metadata": {"a": "b"}, "store": false,
    }));
    assert_eq!(
        openai,
        json!({
            "model": "up-model",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "max_completion_tokens": 100, "temperature": 0.5, "top_p": 0.9,
            "reasoning_effort": "low", "user": "u1", "prompt_cache_key": "sess-1",
        })
    );
    let opts = RequestOptions {
        max_tokens_field: MaxTokensField::MaxTokens,
        ..RequestOptions::new("m")
    };
    let translated = request_to(
        WireFormat::OpenAi,
        br#"{"input":"x","max_output_tokens":7}"#,
        &opts,
    )
    .unwrap();
    let openai: Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(openai["max_tokens"], 7);
    assert!(openai.get("max_completion_tokens").is_none());
}

#[test]
fn a_stream_asks_for_usage() {
    let translated = to(WireFormat::OpenAi, json!({"input": "x", "stream": true})).unwrap();
    assert!(translated.stream);
    let parsed: Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(parsed["stream"], true);
    assert_eq!(parsed["stream_options"], json!({"include_usage": true}));
}

/// A tool loop as Codex sends it: developer message, user parts, reasoning, function call and
/// its output, with item ids and statuses.
fn tool_loop() -> Value {
    json!({
        "input": [
            {"type": "message", "id": "msg_1", "role": "developer",
             "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}],
             "encrypted_content": null},
            {"type": "function_call", "status": "completed", "id": "fc_1", "name": "exec_command",
             "arguments": "{\"cmd\":\"ls\"}", "call_id": "call_1"},
            {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "a\nb\n"},
            {"type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Two files.", "annotations": []}]},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [{"type": "function", "name": "exec_command", "description": "run", "strict": false,
                   "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}],
        "tool_choice": "auto", "parallel_tool_calls": false,
    })
}

#[test]
fn items_become_chat_messages() {
    let openai = chat(tool_loop());
    assert_eq!(
        openai["messages"],
        json!([
            {"role": "system", "content": "rules"},
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"}}]},
            {"role": "assistant", "content": null, "reasoning_content": "think",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a\nb\n"},
            {"role": "assistant", "content": "Two files."},
            {"role": "user", "content": "thanks"},
        ])
    );
    assert_eq!(
        openai["tools"],
        json!([{"type": "function", "function": {"name": "exec_command", "description": "run",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}])
    );
    assert_eq!(openai["tool_choice"], "auto");
    assert_eq!(openai["parallel_tool_calls"], false);
}

#[test]
fn items_become_anthropic_messages_through_chat() {
    let anthropic = messages(tool_loop());
    assert_eq!(anthropic["system"], json!("rules"), "{anthropic}");
    assert_eq!(anthropic["max_tokens"], 8192, "Anthropic requires it");
    let msgs = anthropic["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[0]["content"][1]["type"], "image");
    assert_eq!(msgs[1]["role"], "assistant");
    let tool_use = msgs[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool_use["id"], "call_1");
    assert_eq!(tool_use["input"], json!({"cmd": "ls"}));
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "call_1");
    assert_eq!(anthropic["tools"][0]["name"], "exec_command");
    assert_eq!(
        anthropic["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
}

#[test]
fn text_format_json_schema_maps_to_each_provider() {
    let body = json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "out",
        "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}});
    let openai = chat(body.clone());
    assert_eq!(
        openai["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "out", "strict": true,
               "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}})
    );
    let anthropic = messages(body);
    assert_eq!(
        anthropic["output_config"]["format"]["type"], "json_schema",
        "{anthropic}"
    );
}

#[test]
fn namespace_tools_are_flattened_and_their_calls_in_history_too() {
    let body = json!({
        "input": [{"type": "function_call", "call_id": "c1", "name": "spawn_agent",
                   "namespace": "multi_agent_v1", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
        "tools": [{"type": "namespace", "name": "multi_agent_v1", "description": "agents",
                   "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
                             {"type": "function", "name": "wait_agent"}]},
                  {"type": "web_search", "external_web_access": false}],
    });
    let translated = to(WireFormat::OpenAi, body).unwrap();
    let parsed: Value = serde_json::from_slice(&translated.body).unwrap();
    let names: Vec<&str> = parsed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "multi_agent_v1__ns__spawn_agent",
            "multi_agent_v1__ns__wait_agent"
        ]
    );
    assert_eq!(
        parsed["tools"][1]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(
        parsed["messages"][0]["tool_calls"][0]["function"]["name"],
        "multi_agent_v1__ns__spawn_agent"
    );
    assert_eq!(translated.dropped, ["tools[1] web_search"]);
    assert_eq!(
        split("multi_agent_v1__ns__wait_agent"),
        (Some("multi_agent_v1"), "wait_agent")
    );
    assert_eq!(
        split("mcp__server__tool"),
        (None, "mcp__server__tool"),
        "MCP names stay whole"
    );
    assert_eq!(split("__ns__x"), (None, "__ns__x"));
    // A history call without its namespace is matched to the one namespace tool of that name.
    let parsed = chat(
        json!({"input": [{"type": "function_call", "call_id": "c1", "name": "wait_agent", "arguments": "{}"},
                                  {"type": "function_call", "call_id": "c2", "name": "other", "arguments": "{}"},
                                  {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                                  {"type": "function_call_output", "call_id": "c2", "output": "ok"}],
                        "tools": [{"type": "namespace", "name": "multi_agent_v1",
                                   "tools": [{"type": "function", "name": "wait_agent"}]}]}),
    );
    let calls = &parsed["messages"][0]["tool_calls"];
    assert_eq!(
        calls[0]["function"]["name"],
        "multi_agent_v1__ns__wait_agent"
    );
    assert_eq!(calls[1]["function"]["name"], "other");
    let error = to(
        WireFormat::OpenAi,
        json!({"input": "x", "tools": [{"type": "function", "name": "a__ns__b"}]}),
    )
    .unwrap_err();
    assert_eq!(error.field, "tools[0].name");
}

#[test]
fn built_in_tools_other_than_web_search_are_refused_by_name() {
    for kind in [
        "file_search",
        "code_interpreter",
        "computer_use_preview",
        "image_generation",
        "mcp",
        "local_shell",
    ] {
        let error = to(
            WireFormat::OpenAi,
            json!({"input": "x", "tools": [
            {"type": "function", "name": "f"}, {"type": kind}]}),
        )
        .unwrap_err();
        assert_eq!(error.field, "tools[1]", "{kind}");
        assert_eq!(error.kind, TranslateErrorKind::Unsupported);
        assert!(error.reason.contains(&format!("`{kind}`")), "{error}");
    }
    let error = to(
        WireFormat::Anthropic,
        json!({"input": "x", "tools": [{"type": "web_search"}],
        "tool_choice": {"type": "web_search"}}),
    )
    .unwrap_err();
    assert_eq!(
        error.field, "tool_choice",
        "a forced web search cannot be dropped: {error}"
    );
}

#[test]
fn state_at_the_upstream_needs_a_native_channel() {
    for (k, v) in [
        ("previous_response_id", json!("resp_1")),
        ("store", json!(true)),
        ("background", json!(true)),
        ("conversation", json!("conv_1")),
        ("prompt", json!({"id": "pmpt_1"})),
    ] {
        let mut body = json!({"input": "x"});
        body[k] = v;
        let error = to(WireFormat::Anthropic, body).unwrap_err();
        assert_eq!(error.field, k);
        assert!(error.reason.contains("natively"), "{error}");
    }
    let error = to(
        WireFormat::OpenAi,
        json!({"input": [{"type": "item_reference", "id": "msg_1"}]}),
    )
    .unwrap_err();
    assert_eq!(error.field, "input[0]");
    assert!(error.reason.contains("natively"), "{error}");
    let error = to(
        WireFormat::OpenAi,
        json!({"input": [{"role": "user", "content": [
        {"type": "input_image", "file_id": "file_1"}]}]}),
    )
    .unwrap_err();
    assert_eq!(error.field, "input[0].content[0].file_id");
}

#[test]
fn unknown_fields_and_bad_shapes_are_named() {
    let error = to(WireFormat::OpenAi, json!({"input": "x", "frobnicate": 1})).unwrap_err();
    assert_eq!(error.field, "frobnicate");
    let error = to(WireFormat::OpenAi, json!({"instructions": "x"})).unwrap_err();
    assert_eq!(
        (error.field.as_str(), error.kind),
        ("input", TranslateErrorKind::Invalid)
    );
    let error = to(
        WireFormat::OpenAi,
        json!({"input": [{"type": "function_call", "name": "f"}]}),
    )
    .unwrap_err();
    assert_eq!(error.field, "input[0].call_id");
    let error = request_to(WireFormat::OpenAi, b"{", &RequestOptions::new("m")).unwrap_err();
    assert_eq!(error.kind, TranslateErrorKind::Invalid);
}

#[test]
fn a_refusal_of_the_chat_step_says_where_it_came_from() {
    let error = to(
        WireFormat::Anthropic,
        json!({"input": "x", "temperature": 1.5}),
    )
    .unwrap_err();
    assert!(
        error.reason.contains("Anthropic Messages") && error.reason.contains("temperature"),
        "{error}"
    );
}

#[test]
fn tool_outputs_with_images_follow_as_a_user_message() {
    let openai = chat(json!({"input": [
        {"type": "function_call", "call_id": "c1", "name": "view_image", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": "here"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
        {"role": "user", "content": "what is it?"}]}));
    let roles: Vec<&str> = openai["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["assistant", "tool", "user", "user"]);
    assert_eq!(openai["messages"][1]["content"], "here");
    assert_eq!(openai["messages"][2]["content"][0]["type"], "image_url");
}
