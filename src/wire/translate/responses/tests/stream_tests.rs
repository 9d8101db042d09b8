//! Streams: the typed event sequence from Chat chunks and from Anthropic events (preamble,
//! items opened, deltas, closed, terminal event), the commit point, errors before and after
//! content, a cut stream, and namespace calls mapped back.

use serde_json::{json, Value};

use super::super::super::WireFormat;
use super::super::answer_from;
use super::harness::{accumulate, events, run, Ans, OPTS};

fn text_only() -> Ans {
    Ans {
        reasoning: None,
        text: Some("Hello there".into()),
        calls: vec![],
        max_tokens: false,
        usage: (10, 0, 2),
    }
}

fn names(evs: &[(String, Value)]) -> Vec<&str> {
    evs.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn a_text_answer_is_the_documented_event_sequence() {
    let (out, steps) = run(WireFormat::OpenAi, &text_only().chat_stream(&[5]));
    let evs = events(&out);
    assert_eq!(
        names(&evs),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(evs[0].1["response"]["status"], "in_progress");
    assert_eq!(evs[0].1["response"]["id"], "resp_req42");
    assert_eq!(evs[4].1["delta"], "Hello");
    assert_eq!(evs[6].1["text"], "Hello there");
    let done = &evs[9].1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["usage"]["input_tokens"], 10);
    assert_eq!(done["usage"]["output_tokens"], 2);
    // The role chunk is preamble; the first delta is the commit point; [DONE] is terminal.
    assert!(!steps[0].content && !steps[0].terminal);
    assert!(steps[1].content);
    assert!(
        steps.iter().rev().nth(1).is_some_and(|s| s.terminal),
        "{steps:?}"
    );
    let (output, response) = accumulate(&evs);
    assert_eq!(output, response["output"].as_array().unwrap().clone());
}

#[test]
fn a_tool_call_from_anthropic_streams_its_arguments() {
    let answer = Ans {
        reasoning: Some("hmm".into()),
        text: None,
        calls: vec![(
            "toolu_1".into(),
            "exec_command".into(),
            r#"{"cmd":"echo tool-ok"}"#.into(),
        )],
        max_tokens: false,
        usage: (50, 40, 9),
    };
    let (out, steps) = run(WireFormat::Anthropic, &answer.anthropic_stream(&[3, 8]));
    let evs = events(&out);
    let event_names = names(&evs);
    assert_eq!(
        &event_names[..5],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta"
        ]
    );
    assert!(event_names.contains(&"response.function_call_arguments.delta"));
    assert!(event_names.contains(&"response.function_call_arguments.done"));
    assert_eq!(*event_names.last().unwrap(), "response.completed");
    let (output, response) = accumulate(&evs);
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(output[1]["call_id"], "toolu_1");
    assert_eq!(output[1]["arguments"], r#"{"cmd":"echo tool-ok"}"#);
    assert_eq!(response["usage"]["input_tokens"], 50);
    assert_eq!(
        response["usage"]["input_tokens_details"]["cached_tokens"],
        40
    );
    // message_start and ping are preamble: nothing is content before the first delta.
    assert!(!steps[0].content && !steps[1].content);
    // The non-stream translation of the same answer has the same output.
    let whole = answer_from(
        WireFormat::Anthropic,
        answer.anthropic().to_string().as_bytes(),
        &OPTS,
    )
    .unwrap();
    let whole: Value = serde_json::from_slice(&whole.body).unwrap();
    assert_eq!(whole["output"], response["output"]);
    assert_eq!(whole["usage"], response["usage"]);
}

#[test]
fn a_length_stop_ends_with_response_incomplete() {
    let answer = Ans {
        max_tokens: true,
        ..text_only()
    };
    for (upstream, evs) in [
        (WireFormat::OpenAi, answer.chat_stream(&[])),
        (WireFormat::Anthropic, answer.anthropic_stream(&[])),
    ] {
        let (out, _) = run(upstream, &evs);
        let evs = events(&out);
        let (name, last) = evs.last().unwrap();
        assert_eq!(name, "response.incomplete", "{upstream:?}");
        assert_eq!(
            last["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );
        accumulate(&evs);
    }
}

#[test]
fn an_error_before_content_is_a_hidden_error_and_after_content_a_failed_response() {
    let overloaded = (
        Some("error".to_string()),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string(),
    );
    let mut evs = text_only().anthropic_stream(&[]);
    evs.truncate(2);
    evs.push(overloaded.clone());
    let (_, steps) = run(WireFormat::Anthropic, &evs);
    let step = &steps[2];
    assert!(
        step.error.is_some() && step.error_before_content && step.terminal,
        "{step:?}"
    );

    let mut evs = text_only().anthropic_stream(&[2]);
    evs.truncate(5); // start, ping, block start, two deltas
    evs.push(overloaded);
    let (out, steps) = run(WireFormat::Anthropic, &evs);
    let step = &steps[5];
    assert!(
        step.error.is_some() && !step.error_before_content && step.terminal,
        "{step:?}"
    );
    let evs = events(&out);
    let (name, last) = evs.last().unwrap();
    assert_eq!(name, "response.failed");
    assert_eq!(last["response"]["status"], "failed");
    assert_eq!(last["response"]["error"]["code"], "server_is_overloaded");
}

#[test]
fn a_cut_stream_is_not_terminal_and_writes_nothing_at_the_end() {
    let mut evs = text_only().chat_stream(&[]);
    evs.truncate(2);
    let (out, steps) = run(WireFormat::OpenAi, &evs);
    assert!(!steps.last().unwrap().terminal);
    assert!(!out.contains("response.completed"), "{out}");
    // A chat stream that gave its finish_reason but no [DONE] is complete.
    let mut evs = text_only().chat_stream(&[]);
    evs.truncate(evs.len() - 1);
    let (out, steps) = run(WireFormat::OpenAi, &evs);
    assert!(steps.last().unwrap().terminal);
    assert!(out.contains("event: response.completed"));
}

#[test]
fn namespace_calls_are_mapped_back_in_the_stream() {
    let req = json!({"input": "x", "tools": [{"type": "namespace", "name": "ns",
        "tools": [{"type": "function", "name": "go"}]}]});
    let translated = super::super::request_to(
        WireFormat::OpenAi,
        req.to_string().as_bytes(),
        &super::super::super::RequestOptions::new("m"),
    )
    .unwrap();
    let sent: Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(sent["tools"][0]["function"]["name"], "ns__ns__go");
    let answer = Ans {
        calls: vec![("c1".into(), "ns__ns__go".into(), "{}".into())],
        text: None,
        ..text_only()
    };
    let (out, _) = run(WireFormat::OpenAi, &answer.chat_stream(&[]));
    let evs = events(&out);
    let added = evs
        .iter()
        .find(|(n, _)| n == "response.output_item.added")
        .unwrap();
    assert_eq!(added.1["item"]["name"], "go");
    assert_eq!(added.1["item"]["namespace"], "ns");
    let (output, _) = accumulate(&evs);
    assert_eq!(output[0]["name"], "go");
}

#[test]
fn interleaved_tool_arguments_are_an_unreadable_answer() {
    let head = |d: Value| {
        (None, json!({"id": "c", "model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": null}]}).to_string())
    };
    let evs = vec![
        head(json!({"role": "assistant", "content": ""})),
        head(
            json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": ""}}]}),
        ),
        head(
            json!({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}),
        ),
        head(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})),
    ];
    let (out, steps) = run(WireFormat::OpenAi, &evs);
    assert!(
        steps[3].error.is_some() && steps[3].terminal,
        "{:?}",
        steps[3]
    );
    assert!(
        out.ends_with("\n\n") && out.contains("event: response.failed"),
        "{out}"
    );
}

#[test]
fn a_gemini_stream_is_the_same_sequence() {
    let part = |parts: Value, finish: Value| {
        (
            None,
            json!({"candidates": [{"content": {"role": "model", "parts": parts},
                       "finishReason": finish, "index": 0}],
                      "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4}})
            .to_string(),
        )
    };
    let evs = vec![
        part(json!([{"text": "Hel"}]), Value::Null),
        part(json!([{"text": "lo"}]), Value::Null),
        part(
            json!([{"functionCall": {"name": "f", "args": {"a": 1}}}]),
            json!("STOP"),
        ),
    ];
    let (out, steps) = run(WireFormat::Gemini, &evs);
    let evs = events(&out);
    let (output, response) = accumulate(&evs);
    assert_eq!(output[0]["content"][0]["text"], "Hello");
    assert_eq!(output[1]["name"], "f");
    assert_eq!(output[1]["arguments"], r#"{"a":1}"#);
    assert_eq!(response["status"], "completed");
    assert_eq!(response["usage"]["input_tokens"], 9);
    assert!(steps[0].content, "Gemini's first part is content");
    assert!(steps[2].terminal);
}
