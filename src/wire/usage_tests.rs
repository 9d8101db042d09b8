//! The one usage reader: bodies and stream events, every dialect, odd field types.
use serde_json::Value;

use super::*;
use crate::wire::sse::Event;
use crate::wire::usage_stream::StreamUsage;

#[test]
fn openai_and_anthropic_bodies() {
    let usage = Usage::from_body(br#"{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}"#).unwrap();
    assert_eq!(
        usage,
        Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 4,
            cache_write_tokens: 0,
            ..Default::default()
        }
    );
    let usage = Usage::from_body(
        br#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}"#,
    )
    .unwrap();
    assert_eq!(
        usage,
        Usage {
            prompt_tokens: 9,
            completion_tokens: 3,
            cached_tokens: 2,
            cache_write_tokens: 0,
            ..Default::default()
        }
    );
    assert!(Usage::from_body(b"{}").is_none());
}

fn ev(d: &str) -> Event {
    Event::data(d)
}

#[test]
fn stream_usage_reported_is_not_estimated() {
    let mut usage = StreamUsage::default();
    usage.observe(&ev(r#"{"choices":[{"delta":{"content":"hello world!"}}]}"#));
    usage.observe(&ev(
        r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
    ));
    assert_eq!(
        usage.settle(1000),
        (
            Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                ..Usage::default()
            },
            false
        )
    );
}

/// R16.5: a translated stream whose upstream ignored `include_usage` ends with
/// `output_tokens: 0` after relaying text; that zero is not billed, the content is estimated.
#[test]
fn a_zero_output_report_after_content_is_estimated_not_billed_as_zero() {
    let mut usage = StreamUsage::default();
    usage.observe(&ev(
        r#"{"type":"message_start","message":{"usage":{"input_tokens":0,"output_tokens":0}}}"#,
    ));
    usage.observe(&ev(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefghijklmnop"}}"#));
    usage.observe(&ev(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":0}}"#));
    let (u, est) = usage.settle(400);
    assert!(est);
    assert_eq!((u.prompt_tokens, u.completion_tokens), (100, 4));
    // A stream that produced nothing and says so is not estimated.
    let mut usage = StreamUsage::default();
    usage.observe(&ev(
        r#"{"type":"message_delta","usage":{"output_tokens":0}}"#,
    ));
    assert!(!usage.settle(400).1);
}

#[test]
fn cut_stream_is_estimated_from_content() {
    let mut usage = StreamUsage::default();
    // 12 + 5 chars of chat content, tool arguments count too.
    usage.observe(&ev(r#"{"choices":[{"delta":{"content":"hello world!"}}]}"#));
    usage.observe(&ev(
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"a\"}"}}]}}]}"#,
    ));
    let (u, est) = usage.settle(400);
    assert!(est);
    assert_eq!(u.completion_tokens, 5); // ceil(17 / 4)
    assert_eq!(u.prompt_tokens, 100);
    // Anthropic: input reported at message_start is kept, output estimated.
    let mut usage = StreamUsage::default();
    usage.observe(&ev(
        r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#,
    ));
    usage.observe(&ev(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefghij"}}"#));
    let (u, est) = usage.settle(4000);
    assert!(est);
    assert_eq!((u.prompt_tokens, u.completion_tokens), (9, 3));
    // Responses deltas.
    let mut usage = StreamUsage::default();
    usage.observe(&ev(
        r#"{"type":"response.output_text.delta","delta":"abcdefgh"}"#,
    ));
    assert_eq!(usage.settle(0).0.completion_tokens, 2);
}

#[test]
fn anthropic_stream_merges_start_and_delta() {
    let mut usage = StreamUsage::default();
    usage.observe(&ev(
        r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#,
    ));
    usage.observe(&ev(
        r#"{"type":"message_delta","usage":{"output_tokens":12}}"#,
    ));
    assert_eq!(
        usage.reported,
        Usage {
            prompt_tokens: 9,
            completion_tokens: 12,
            ..Usage::default()
        }
    );
}

/// The event path: a full `Value` parse, its usage object folded by `Usage::absorb`.
fn reference(body: &[u8]) -> Option<Usage> {
    let parsed: Value = serde_json::from_slice(body).ok()?;
    let usage = if parsed["usage"].is_object() {
        &parsed["usage"]
    } else {
        &parsed["response"]["usage"]
    };
    if !usage.is_object() {
        return None;
    }
    let mut out = Usage::default();
    out.absorb(usage);
    Some(out)
}

#[test]
fn bodies_and_events_read_usage_alike() {
    let bodies: &[&str] = &[
        r#"{"id":"x","choices":[{"message":{"content":"hi \"usage\""}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}"#,
        r#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}"#,
        r#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":90000,"cache_creation_input_tokens":500}}"#,
        r#"{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":40}}}"#,
        r#"{"response":{"usage":{"input_tokens":7,"output_tokens":3,"input_tokens_details":{"cached_tokens":1}}}}"#,
        r#"{"usage":{"prompt_tokens":1.5,"completion_tokens":"7","extra":[1,{"a":2}]}}"#,
        r#"{"usage":{"prompt_tokens":-3,"completion_tokens":null}}"#,
        r#"{"usage":{}}"#,
        // Odd shapes read as absent, field by field, on both paths.
        r#"{"usage":{"prompt_tokens":10,"prompt_tokens_details":5,"completion_tokens":2}}"#,
        r#"{"usage":{"input_tokens":4,"input_tokens_details":[1],"output_tokens":1}}"#,
        r#"{"usage":"n/a","response":{"usage":{"input_tokens":2,"output_tokens":1}}}"#,
        r#"{"usage":null,"response":{"usage":{"input_tokens":2}}}"#,
        r#"{"id":"no usage","choices":[]}"#,
        "{}",
        "[1,2]",
        "not json",
        "",
        // An escaped key, trailing bytes, a body cut short, a control character in a
        // string, deep nesting (below).
        r#"{"note":"usage","us\u0061ge":{"prompt_tokens":3,"completion_tokens":1}}"#,
        r#"{"usage":{"prompt_tokens":3}} x"#,
        r#"{"usage":{"prompt_tokens":3}"#,
        "{\"id\":\"a\u{1}b\",\"usage\":{\"prompt_tokens\":3}}",
        // Whitespace around the body, escapes and non-ASCII text before the usage.
        " \n{\"choices\":[{\"message\":{\"content\":\"caf\u{e9} \\\"q\\\" \\u00e9\"}}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2}}\r\n",
        // Anthropic's answer: the usage after the content.
        r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":4}}"#,
    ];
    let deep = format!(
        r#"{{"choices":{}1{},"usage":{{"prompt_tokens":5}}}}"#,
        "[".repeat(110),
        "]".repeat(110)
    );
    let bodies = bodies.iter().copied().chain([deep.as_str()]);
    for b in bodies {
        assert_eq!(
            Usage::from_body(b.as_bytes()),
            reference(b.as_bytes()),
            "{b}"
        );
    }
}

/// What a stream's usage reading holds, for comparing two readings.
fn held(u: &StreamUsage) -> (Usage, bool, u64) {
    (u.reported, u.final_seen, u.content_chars)
}

/// The stream events' usage is read typed when it can be, and must read as the tree does:
/// the same reports folded in the same order, the same "final report" verdict, the same
/// content characters, event by event through whole streams of every dialect (R8.5, R11).
#[test]
fn stream_events_read_usage_typed_as_the_tree_does() {
    let streams: &[&[&str]] = &[
        // OpenAI chat: content, then the usage-only chunk (with details), then one with
        // content and usage together.
        &[
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}"#,
            r#"{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"#,
            r#"{"choices":[{"delta":{"content":"a\u00e9\"b","reasoning_content":"xy"}}],"usage":{"prompt_tokens":11,"completion_tokens":6}}"#,
        ],
        // Anthropic: input at message_start, output at message_delta.
        &[
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":20,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":1}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefgh"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
        ],
        // Responses: the final event's response.usage; a top-level usage beside it.
        &[
            r#"{"type":"response.output_text.delta","delta":"hey"}"#,
            r#"{"type":"response.completed","response":{"usage":{"input_tokens":7,"output_tokens":3,"input_tokens_details":{"cached_tokens":1}}}}"#,
            r#"{"usage":{"prompt_tokens":2},"response":{"usage":{"output_tokens":4}},"message":{"usage":{"input_tokens":8}}}"#,
        ],
        // Odd shapes: wrong types field by field, null and non-object usage, a report with
        // no output tokens, numbers out of range, a repeated key (the tree keeps the last).
        &[
            r#"{"usage":{"prompt_tokens":1.5,"completion_tokens":"7","extra":[1,{"a":2}]}}"#,
            r#"{"usage":{"prompt_tokens":-3,"completion_tokens":null,"output_tokens":true}}"#,
            r#"{"usage":null,"response":{"usage":{"input_tokens":2}}}"#,
            r#"{"usage":"n/a","message":[1]}"#,
            r#"{"usage":{"prompt_tokens":99999999999999999999999,"completion_tokens":18446744073709551615}}"#,
            r#"{"usage":{"prompt_tokens":1,"completion_tokens":1},"usage":{"prompt_tokens":3}}"#,
            r#"{"usage":{"completion_tokens":1,"completion_tokens":2}}"#,
            r#"{"message":{"usage":{"input_tokens":4}},"message":{"usage":{"input_tokens":6}}}"#,
            r#"{"usage":{}}"#,
            r#"{"usage":{"prompt_tokens":5}} trailing"#,
            "[1,2]",
            "[DONE]",
            "",
        ],
    ];
    for stream in streams {
        let (mut typed, mut tree) = (StreamUsage::default(), StreamUsage::default());
        for data in *stream {
            typed.observe(&ev(data));
            tree.observe_tree(&ev(data));
            assert_eq!(held(&typed), held(&tree), "after {data}");
        }
    }
}

/// The typed reading declines (and leaves the usage as it was) what it cannot read exactly
/// as the tree does; the tree then reads it.
#[test]
fn the_typed_event_reading_declines_repeated_keys_and_non_objects() {
    for data in [
        r#"{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":3}}"#,
        r#"{"response":{"usage":{}},"response":{"usage":{"input_tokens":6}}}"#,
        "[1,2]",
        "not json",
    ] {
        let mut u = Usage {
            prompt_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(u.absorb_event(data), None, "{data}");
        assert_eq!(u.prompt_tokens, 1, "{data}");
    }
    let mut u = Usage::default();
    assert_eq!(
        u.absorb_event(r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}"#),
        Some(true)
    );
    assert_eq!((u.prompt_tokens, u.completion_tokens), (10, 5));
    assert_eq!(
        u.absorb_event(r#"{"usage":{"input_tokens":3}}"#),
        Some(false)
    );
}

/// A body that names `usage` twice is refused by the typed reading: no usage, neither the
/// first report nor the last (the tree reading would take the last).
#[test]
fn a_duplicated_usage_member_reads_as_none() {
    let body = br#"{"usage":{"prompt_tokens":3},"usage":{"prompt_tokens":4}}"#;
    assert_eq!(Usage::from_body(body), None);
}

/// A body read as text (valid UTF-8) and one that is not (a stray byte in a skipped
/// string, which the byte reading never checks) give the usage the byte reading gives.
#[test]
fn a_body_reads_alike_as_text_and_as_bytes() {
    let text = "{\"choices\":[{\"message\":{\"content\":\"caf\u{e9} \\\"q\\\"\"}}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":3}}}";
    let mut bytes = text.as_bytes().to_vec();
    let at = text.find("caf").unwrap_or(0) + 3;
    bytes[at] = 0xff; // the first byte of "é" alone: not UTF-8 any more
    let want = Usage {
        prompt_tokens: 8,
        completion_tokens: 2,
        cached_tokens: 3,
        ..Usage::default()
    };
    assert_eq!(Usage::from_body(text.as_bytes()), Some(want));
    assert!(std::str::from_utf8(&bytes).is_err());
    assert_eq!(Usage::from_body(&bytes), Some(want));
}
