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
    ];
    for b in bodies {
        assert_eq!(
            Usage::from_body(b.as_bytes()),
            reference(b.as_bytes()),
            "{b}"
        );
    }
}
