//! Per-format meaning of stream events: terminal events (R9.4), the preamble held before the
//! commit point (R9.3), hidden errors (R9.5), the usage-only chunk, error bodies.
use super::*;

fn events(chunks: &[&[u8]]) -> Vec<Event> {
    crate::wire::sse::tests::events(chunks, false)
}

/// An event named `name` (or not) carrying `data`.
fn ev(name: Option<&str>, data: &str) -> Event {
    Event::new(
        Bytes::new(),
        name.map(str::to_string),
        Some(data.to_string()),
        false,
    )
}

#[test]
fn terminal_event_table() {
    use StreamFormat::*;
    let cases: &[(StreamFormat, Event, bool)] = &[
        (Chat, ev(None, "[DONE]"), true),
        (
            Chat,
            ev(
                None,
                r#"{"choices":[{"delta":{"content":"x"},"finish_reason":null}]}"#,
            ),
            false,
        ),
        (
            Chat,
            ev(None, r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#),
            true,
        ),
        (
            Chat,
            ev(
                None,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            ),
            true,
        ),
        (
            Chat,
            ev(None, r#"{"choices":[],"usage":{"prompt_tokens":1}}"#),
            false,
        ),
        (Responses, ev(Some("response.completed"), "{}"), true),
        (Responses, ev(Some("response.failed"), "{}"), true),
        (Responses, ev(Some("response.incomplete"), "{}"), true),
        (
            Responses,
            ev(Some("response.output_text.delta"), "{}"),
            false,
        ),
        (
            Responses,
            ev(None, r#"{"type":"response.completed"}"#),
            true,
        ),
        (
            Messages,
            ev(Some("message_stop"), r#"{"type":"message_stop"}"#),
            true,
        ),
        (
            Messages,
            ev(Some("message_delta"), r#"{"type":"message_delta"}"#),
            false,
        ),
        (Messages, ev(None, r#"{"type":"message_stop"}"#), true),
        (Other, ev(None, "[DONE]"), false),
    ];
    for (i, (f, e, want)) in cases.iter().enumerate() {
        assert_eq!(is_terminal(*f, e), *want, "case {i}: {f:?} {e:?}");
    }
}

/// Only the event after which nothing is meant to come is the last: a chat chunk with a
/// `finish_reason` is terminal (R9.4) but not last, the usage chunk follows it.
#[test]
fn the_last_event_is_done_or_the_closing_event() {
    use StreamFormat::*;
    let cases = [
        (Chat, ev(None, "[DONE]"), true),
        (Chat, ev(None, " [DONE] "), true),
        (
            Chat,
            ev(None, r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#),
            false,
        ),
        (
            Chat,
            ev(None, r#"{"choices":[],"usage":{"total_tokens":3}}"#),
            false,
        ),
        (
            Responses,
            ev(
                Some("response.completed"),
                r#"{"type":"response.completed"}"#,
            ),
            true,
        ),
        (
            Responses,
            ev(
                Some("response.output_text.done"),
                r#"{"type":"response.output_text.done"}"#,
            ),
            false,
        ),
        (
            Messages,
            ev(Some("message_stop"), r#"{"type":"message_stop"}"#),
            true,
        ),
        (
            Messages,
            ev(Some("message_delta"), r#"{"type":"message_delta"}"#),
            false,
        ),
        (Other, ev(None, "[DONE]"), false),
    ];
    for (i, (f, e, want)) in cases.iter().enumerate() {
        assert_eq!(is_last(*f, e), *want, "case {i}: {f:?} {e:?}");
    }
}

#[test]
fn incomplete_events_are_in_each_format() {
    let chat = String::from_utf8(incomplete_event(StreamFormat::Chat, "cut").to_vec()).unwrap();
    assert!(chat.starts_with("data: {\"error\""), "{chat}");
    assert!(chat.contains("stream_incomplete") && !chat.contains("[DONE]"));
    let resp =
        String::from_utf8(incomplete_event(StreamFormat::Responses, "cut").to_vec()).unwrap();
    assert!(resp.starts_with("event: error\n") && resp.contains("\"code\":\"stream_incomplete\""));
    let msg = String::from_utf8(incomplete_event(StreamFormat::Messages, "cut").to_vec()).unwrap();
    assert!(msg.starts_with("event: error\n") && msg.contains("\"type\":\"api_error\""));
}

#[test]
fn hidden_error_in_first_event() {
    let errors = events(&[b"data: {\"error\":{\"code\":429,\"message\":\"slow down\"}}\n\n"]);
    assert_eq!(hidden_error(&errors[0]), Some(Some(429)));
    let errors = events(&[b"data: {\"error\":{\"message\":\"boom\"}}\n\n"]);
    assert_eq!(hidden_error(&errors[0]), Some(None));
    let errors = events(&[b"data: {\"choices\":[]}\n\n"]);
    assert_eq!(hidden_error(&errors[0]), None);
}

#[test]
fn preamble_and_pre_commit_errors() {
    use StreamFormat::*;
    let named = |n: &str, d: &str| Event::new(Bytes::new(), Some(n.into()), Some(d.into()), false);
    assert!(is_preamble(Messages, &named("message_start", "{}")));
    assert!(is_preamble(Messages, &Event::data(r#"{"type":"ping"}"#)));
    assert!(!is_preamble(Messages, &named("content_block_delta", "{}")));
    assert!(is_preamble(
        Responses,
        &Event::data(r#"{"type":"response.in_progress"}"#)
    ));
    assert!(!is_preamble(Chat, &Event::data(r#"{"type":"ping"}"#)));
    assert_eq!(
        pre_commit_error(Responses, &named("error", "{}")),
        Some(502)
    );
    assert_eq!(
        pre_commit_error(Responses, &Event::data(r#"{"type":"response.failed"}"#)),
        Some(502)
    );
    assert_eq!(pre_commit_error(Chat, &named("error", "{}")), None);
    assert_eq!(
        pre_commit_error(Chat, &Event::data(r#"{"error":{"code":"503"}}"#)),
        Some(503)
    );
}

#[test]
fn error_bodies_in_every_shape() {
    let error_body =
        ErrorBody::read(br#"{"error":{"code":"rate_limited","type":"x","message":"slow"}}"#);
    assert_eq!(
        (
            error_body.code.as_deref(),
            error_body.kind.as_deref(),
            error_body.message.as_str()
        ),
        (Some("rate_limited"), Some("x"), "slow")
    );
    let error_body = ErrorBody::read(br#"{"type":"overloaded_error","message":"busy"}"#);
    assert_eq!(
        (error_body.kind.as_deref(), error_body.message.as_str()),
        (Some("overloaded_error"), "busy")
    );
    let long = vec![b'x'; 600];
    let error_body = ErrorBody::read(&long);
    assert_eq!((error_body.code, error_body.message.len()), (None, 512));
}

#[test]
fn dialect_of_each_path() {
    assert_eq!(StreamFormat::of_path("/v1/completions"), StreamFormat::Chat);
    assert_eq!(
        StreamFormat::of_path("/v1/messages"),
        StreamFormat::Messages
    );
    assert_eq!(
        StreamFormat::of_path("/v1/responses"),
        StreamFormat::Responses
    );
    assert_eq!(StreamFormat::of_path("/v1/files"), StreamFormat::Other);
    assert!(StreamFormat::Chat.strips_ids() && !StreamFormat::Messages.strips_ids());
}

/// B-commit-point: the commit point is the first content-bearing event. Empty opening
/// blocks and chat chunks that carry nothing of the answer are preamble; anything with
/// content, reasoning, a tool call, a refusal or a finish reason commits.
#[test]
fn empty_openings_are_preamble_and_content_commits() {
    use StreamFormat::*;
    let named = |n: &str, d: &str| Event::new(Bytes::new(), Some(n.into()), Some(d.into()), false);
    let block = |b: &str| {
        named(
            "content_block_start",
            &format!(r#"{{"type":"content_block_start","index":0,"content_block":{b}}}"#),
        )
    };
    assert!(is_preamble(
        Messages,
        &block(r#"{"type":"text","text":""}"#)
    ));
    assert!(is_preamble(
        Messages,
        &block(r#"{"type":"thinking","thinking":"","signature":""}"#)
    ));
    assert!(!is_preamble(
        Messages,
        &block(r#"{"type":"text","text":"Hi"}"#)
    ));
    assert!(!is_preamble(
        Messages,
        &block(r#"{"type":"tool_use","id":"t","name":"f","input":{}}"#)
    ));
    for preamble in [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#,
        r#"{"choices":[],"prompt_filter_results":[{"prompt_index":0}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[]}}]}"#,
    ] {
        assert!(is_preamble(Chat, &Event::data(preamble)), "{preamble}");
    }
    for content in [
        r#"{"choices":[{"index":0,"delta":{"content":"H"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}"#,
        r#"{"error":{"message":"x"}}"#,
        "[DONE]",
    ] {
        assert!(!is_preamble(Chat, &Event::data(content)), "{content}");
    }
}

/// B-malformed-events: non-JSON data in an OpenAI-format stream is malformed (dropped by the
/// relay); `[DONE]`, comments and other formats are not.
#[test]
fn non_json_data_is_malformed_only_in_openai_formats() {
    use StreamFormat::*;
    assert!(is_malformed(Chat, &Event::data("{not json")));
    assert!(is_malformed(Responses, &Event::data("oops")));
    assert!(!is_malformed(Chat, &Event::data("[DONE]")));
    assert!(!is_malformed(Chat, &Event::data(r#"{"choices":[]}"#)));
    assert!(!is_malformed(Messages, &Event::data("{not json")));
    assert!(!is_malformed(Other, &Event::data("plain")));
    let comment = Event::new(Bytes::from_static(b": hi\n\n"), None, None, true);
    assert!(!is_malformed(Chat, &comment));
}

/// `is_done` and `is_blank` read only the first visible byte of most data; each must say what
/// `str::trim` says, whatever whitespace (ASCII, vertical tab, Unicode) surrounds the data.
#[test]
fn done_and_blank_agree_with_trim() {
    let pads = [
        "", " ", "\t", "\n", "\r\n", "\x0B", "\x0C", "\u{a0}", "\u{2028}", "\u{3000}", "\u{85}",
        "\x1C", "x", "é",
    ];
    let cores = [
        "[DONE]",
        "[DONE",
        "[done]",
        "DONE]",
        "",
        "{}",
        "{\"a\":1}",
        "[DONE] x",
        "[]",
        "é",
    ];
    for before in pads {
        for core in cores {
            for after in pads {
                let d = format!("{before}{core}{after}");
                assert_eq!(is_done(&d), d.trim() == "[DONE]", "is_done({d:?})");
                assert_eq!(is_blank(&d), d.trim().is_empty(), "is_blank({d:?})");
            }
        }
    }
}
