//! Answers: a Chat Completions answer and an Anthropic message as a Responses object —
//! output items, status and incomplete details, usage with cached and reasoning tokens, ids
//! in Responses' formats, namespace calls mapped back, errors in a 200.

use serde_json::{json, Value};

use super::super::super::{ErrorKind, RequestOptions, WireFormat};
use super::super::{answer_from, request_to};
use super::harness::{Ans, OPTS};

fn answer(upstream: WireFormat, body: &Value) -> Value {
    let translated = answer_from(upstream, body.to_string().as_bytes(), &OPTS).expect("translates");
    serde_json::from_slice(&translated.body).expect("JSON")
}

fn tool_answer() -> Ans {
    Ans {
        reasoning: Some("I should list.".into()),
        text: Some("Listing.".into()),
        calls: vec![(
            "call_9".into(),
            "exec_command".into(),
            r#"{"cmd":"ls"}"#.into(),
        )],
        max_tokens: false,
        usage: (120, 100, 30),
    }
}

#[test]
fn a_chat_answer_becomes_output_items() {
    let response = answer(WireFormat::OpenAi, &tool_answer().chat());
    assert_eq!(response["id"], "resp_req42");
    assert_eq!(response["object"], "response");
    assert_eq!(response["created_at"], 1_700_000_000u64);
    assert_eq!(response["status"], "completed");
    assert_eq!(response["model"], "up-model");
    assert_eq!(response["incomplete_details"], Value::Null);
    assert_eq!(
        response["output"],
        json!([
            {"id": "rs_req42_0", "type": "reasoning",
             "summary": [{"type": "summary_text", "text": "I should list."}]},
            {"id": "msg_req42_1", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "Listing.", "annotations": [], "logprobs": []}]},
            {"id": "fc_req42_2", "type": "function_call", "status": "completed",
             "arguments": "{\"cmd\":\"ls\"}", "call_id": "call_9", "name": "exec_command"},
        ])
    );
    assert_eq!(
        response["usage"],
        json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100},
               "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 0},
               "total_tokens": 150})
    );
}

#[test]
fn an_anthropic_answer_gives_the_same_items_and_usage() {
    let a = tool_answer();
    let from_chat = answer(WireFormat::OpenAi, &a.chat());
    let from_anthropic = answer(WireFormat::Anthropic, &a.anthropic());
    assert_eq!(from_anthropic["output"], from_chat["output"]);
    assert_eq!(
        from_anthropic["usage"], from_chat["usage"],
        "cache reads count as input"
    );
    let translated = answer_from(
        WireFormat::Anthropic,
        a.anthropic().to_string().as_bytes(),
        &OPTS,
    )
    .unwrap();
    let usage = translated.usage.expect("usage for billing");
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens
        ),
        (120, 100, 30)
    );
}

#[test]
fn reasoning_tokens_are_reported() {
    let mut body = Ans {
        calls: vec![],
        ..tool_answer()
    }
    .chat();
    body["usage"]["completion_tokens_details"] = json!({"reasoning_tokens": 12});
    let response = answer(WireFormat::OpenAi, &body);
    assert_eq!(
        response["usage"]["output_tokens_details"]["reasoning_tokens"],
        12
    );
}

#[test]
fn length_and_content_filter_are_incomplete() {
    let cut = Ans {
        max_tokens: true,
        calls: vec![],
        reasoning: None,
        ..tool_answer()
    };
    for (upstream, body) in [
        (WireFormat::OpenAi, cut.chat()),
        (WireFormat::Anthropic, cut.anthropic()),
    ] {
        let response = answer(upstream, &body);
        assert_eq!(response["status"], "incomplete", "{upstream:?}");
        assert_eq!(
            response["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(response["output"][0]["status"], "incomplete");
    }
    let mut body = cut.chat();
    body["choices"][0]["finish_reason"] = "content_filter".into();
    let response = answer(WireFormat::OpenAi, &body);
    assert_eq!(
        response["incomplete_details"],
        json!({"reason": "content_filter"})
    );
    let mut m = cut.anthropic();
    m["stop_reason"] = "refusal".into();
    let response = answer(WireFormat::Anthropic, &m);
    assert_eq!(
        response["incomplete_details"],
        json!({"reason": "content_filter"})
    );
}

#[test]
fn a_namespace_call_is_mapped_back() {
    let req = json!({"input": "x", "tools": [{"type": "namespace", "name": "multi_agent_v1",
        "tools": [{"type": "function", "name": "spawn_agent"}]}]});
    let translated = request_to(
        WireFormat::Anthropic,
        req.to_string().as_bytes(),
        &RequestOptions::new("m"),
    )
    .unwrap();
    let sent: Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(
        sent["tools"][0]["name"], "multi_agent_v1__ns__spawn_agent",
        "the name the model sees"
    );
    let translated = Ans {
        calls: vec![(
            "toolu_1".into(),
            "multi_agent_v1__ns__spawn_agent".into(),
            "{}".into(),
        )],
        reasoning: None,
        text: None,
        ..tool_answer()
    };
    let out = answer(WireFormat::Anthropic, &translated.anthropic());
    let call = &out["output"][0];
    assert_eq!(call["name"], "spawn_agent");
    assert_eq!(call["namespace"], "multi_agent_v1");
    assert_eq!(call["call_id"], "toolu_1");
}

#[test]
fn the_client_model_name_is_kept_when_set() {
    let opts = super::super::super::AnswerOptions {
        model: Some("gpt-5.4"),
        ..OPTS
    };
    let translated = answer_from(
        WireFormat::OpenAi,
        tool_answer().chat().to_string().as_bytes(),
        &opts,
    )
    .unwrap();
    let parsed: Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(parsed["model"], "gpt-5.4");
}

#[test]
fn errors_in_a_200_are_upstream_errors() {
    let e = answer_from(
        WireFormat::Anthropic,
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        &OPTS,
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Overloaded);
    let error = answer_from(WireFormat::OpenAi, b"not json", &OPTS).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Api);
}

#[test]
fn a_gemini_answer_becomes_items_with_made_up_call_ids() {
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Checking."},
            {"functionCall": {"name": "exec_command", "args": {"cmd": "ls"}}}]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 7,
                          "cachedContentTokenCount": 32, "thoughtsTokenCount": 3},
        "modelVersion": "gemini-x",
    });
    let response = answer(WireFormat::Gemini, &body);
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["content"][0]["text"], "Checking.");
    let call = &response["output"][1];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "exec_command");
    assert_eq!(call["arguments"], r#"{"cmd":"ls"}"#);
    assert!(
        call["call_id"].as_str().unwrap().starts_with("call_"),
        "{call}"
    );
    assert_eq!(
        response["usage"],
        json!({"input_tokens": 50, "input_tokens_details": {"cached_tokens": 32},
               "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 3},
               "total_tokens": 60})
    );
}
