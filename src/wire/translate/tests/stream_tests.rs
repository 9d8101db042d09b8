//! What `StreamTranslator` reports per event: content (the commit point), terminal, errors
//! before content (hidden errors at the start), usage; what it writes at the end of a cut
//! stream; that nothing follows the terminal event.

use super::super::{AnswerOptions, ErrorKind, StreamStep, StreamTranslator, Usage, WireFormat};

const OPTS: AnswerOptions<'static> = AnswerOptions {
    created: 1,
    id_seed: "s",
    model: None,
};

fn feed_all(t: &mut StreamTranslator, events: &[&str]) -> (Vec<StreamStep>, String) {
    let mut out = Vec::new();
    let steps = events.iter().map(|d| t.feed(None, d, &mut out)).collect();
    (steps, String::from_utf8(out).unwrap())
}

const A_START: &str = r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}"#;
const A_TEXT_START: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const A_TEXT: &str =
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#;
const A_DELTA: &str =
    r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#;
const A_STOP: &str = r#"{"type":"message_stop"}"#;
const A_OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

#[test]
fn anthropic_to_openai_commit_point_and_terminal() {
    let mut translator =
        StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, true);
    let (steps, _) = feed_all(
        &mut translator,
        &[
            A_START,
            A_TEXT_START,
            r#"{"type":"ping"}"#,
            A_TEXT,
            A_DELTA,
            A_STOP,
        ],
    );
    let content: Vec<bool> = steps.iter().map(|s| s.content).collect();
    assert_eq!(content, [false, false, false, true, false, false]);
    let terminal: Vec<bool> = steps.iter().map(|s| s.terminal).collect();
    assert_eq!(terminal, [false, false, false, false, false, true]);
    assert!(steps.iter().all(|s| s.error.is_none()));
    let usage = translator.usage().unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens
        ),
        (15, 5, 7)
    );
    assert_eq!(translator.content_chars(), 2);
    // After the terminal event nothing is written.
    let mut out = Vec::new();
    assert_eq!(
        translator.feed(None, A_TEXT, &mut out),
        StreamStep::default()
    );
    assert!(out.is_empty());
    assert!(translator.finish(&mut out).terminal);
    assert!(out.is_empty());
}

#[test]
fn overload_right_after_message_start_is_a_hidden_error() {
    for to in [WireFormat::OpenAi, WireFormat::Anthropic] {
        let mut translator = StreamTranslator::new(WireFormat::Anthropic, to, &OPTS, false);
        let (steps, out) = feed_all(&mut translator, &[A_START, A_OVERLOADED]);
        let error = steps[1].error.as_ref().expect("error reported");
        assert_eq!(error.kind, ErrorKind::Overloaded);
        assert_eq!(error.status, 529);
        assert_eq!(error.client_status(WireFormat::OpenAi), 503);
        assert!(steps[1].error_before_content && steps[1].terminal, "{to:?}");
        assert!(!translator.content_seen());
        assert!(out.contains("overloaded_error"), "{out}");
    }
}

#[test]
fn an_error_after_content_is_not_hidden() {
    let mut translator =
        StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, false);
    let (steps, out) = feed_all(
        &mut translator,
        &[A_START, A_TEXT_START, A_TEXT, A_OVERLOADED],
    );
    assert!(steps[3].error.is_some() && !steps[3].error_before_content);
    assert!(out.ends_with("\n\n") && !out.contains("[DONE]"), "{out}");
}

#[test]
fn a_cut_anthropic_stream_is_incomplete_and_writes_nothing_at_the_end() {
    let mut translator =
        StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, true);
    feed_all(&mut translator, &[A_START, A_TEXT_START, A_TEXT, A_DELTA]);
    let mut out = Vec::new();
    let finished = translator.finish(&mut out);
    assert!(!finished.terminal && finished.error.is_none());
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
}

#[test]
fn openai_stream_without_done_completes_at_the_end_only_after_finish_reason() {
    let chunk = |delta: &str, finish: &str| {
        format!(
            r#"{{"id":"c","model":"g","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        )
    };
    let (a, b) = (
        chunk(r#"{"content":"x"}"#, "null"),
        chunk("{}", r#""stop""#),
    );
    let mut translator =
        StreamTranslator::new(WireFormat::OpenAi, WireFormat::Anthropic, &OPTS, false);
    let (steps, _) = feed_all(&mut translator, &[&a, &b]);
    assert!(steps[0].content && !steps[1].terminal);
    let mut out = Vec::new();
    assert!(translator.finish(&mut out).terminal);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("message_delta") && out.ends_with("data: {\"type\":\"message_stop\"}\n\n"),
        "{out}"
    );

    let mut cut = StreamTranslator::new(WireFormat::OpenAi, WireFormat::Anthropic, &OPTS, false);
    feed_all(&mut cut, &[&a]);
    let mut out = Vec::new();
    assert!(!cut.finish(&mut out).terminal);
    assert!(out.is_empty());
}

#[test]
fn gemini_prompt_block_and_unreadable_events_are_errors_not_panics() {
    let mut translator =
        StreamTranslator::new(WireFormat::Gemini, WireFormat::Anthropic, &OPTS, false);
    let (steps, out) = feed_all(
        &mut translator,
        &[r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#],
    );
    assert!(steps[0].error_before_content && steps[0].terminal);
    assert_eq!(
        steps[0].error.as_ref().map(|e| e.kind),
        Some(ErrorKind::ContentFilter)
    );
    assert!(out.starts_with("event: error\n"), "{out}");

    for from in [WireFormat::Anthropic, WireFormat::Gemini] {
        let mut translator = StreamTranslator::new(from, WireFormat::OpenAi, &OPTS, false);
        let (steps, _) = feed_all(&mut translator, &["{not json", "[1,2]"]);
        let error = steps[0]
            .error
            .as_ref()
            .expect("unreadable event is an error");
        assert_eq!(
            (error.kind, error.client_status(WireFormat::OpenAi)),
            (ErrorKind::Api, 502)
        );
        assert_eq!(steps[1], StreamStep::default(), "nothing after the error");
    }
}

#[test]
fn gemini_usage_is_the_last_reported() {
    let mut translator =
        StreamTranslator::new(WireFormat::Gemini, WireFormat::OpenAi, &OPTS, false);
    feed_all(
        &mut translator,
        &[
            r#"{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"promptTokenCount":4}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2,"thoughtsTokenCount":3}}"#,
        ],
    );
    let want = Usage {
        prompt_tokens: 4,
        completion_tokens: 5,
        reasoning_tokens: 3,
        ..Usage::default()
    };
    assert_eq!(translator.usage(), Some(want));
}

#[test]
fn a_flood_of_tool_calls_is_cut_off_as_an_unreadable_answer() {
    let mut translator =
        StreamTranslator::new(WireFormat::OpenAi, WireFormat::Anthropic, &OPTS, false);
    let mut out = Vec::new();
    let mut last = StreamStep::default();
    for i in 0..1100 {
        let chunk = format!(
            r#"{{"id":"c","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{i},"id":"c{i}","function":{{"name":"f","arguments":"{{}}"}}}}]}}}}]}}"#
        );
        last = translator.feed(None, &chunk, &mut out);
        if last.terminal {
            assert_eq!(i, 1024, "the 1025th call ends it");
            break;
        }
    }
    let error = last.error.expect("an error");
    assert_eq!(
        (error.kind, error.client_status(WireFormat::Anthropic)),
        (ErrorKind::Api, 502)
    );
    assert!(
        error.message.contains("more than 1024 tool calls"),
        "{}",
        error.message
    );
}

/// Text blocks with another block between them are joined with a blank line, stream and
/// not (as the request direction joins them); neighbouring blocks — one text Anthropic split
/// for its citations — are concatenated.
#[test]
fn text_blocks_around_another_block_are_joined_with_a_blank_line() {
    let body = br#"{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[
        {"type":"text","text":"The grass is "},{"type":"text","text":"green","citations":[]},
        {"type":"thinking","thinking":"more","signature":"s"},{"type":"text","text":"Next."}],
        "stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
    let answer =
        super::super::translate_answer(WireFormat::Anthropic, WireFormat::OpenAi, body, &OPTS)
            .unwrap_or_else(|e| panic!("{e:?}"));
    let parsed: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let want = "The grass is green\n\nNext.";
    assert_eq!(parsed["choices"][0]["message"]["content"], want);

    let block = |i: u8, b: &str| {
        format!(r#"{{"type":"content_block_start","index":{i},"content_block":{b}}}"#)
    };
    let text = |i: u8, t: &str| {
        format!(
            r#"{{"type":"content_block_delta","index":{i},"delta":{{"type":"text_delta","text":"{t}"}}}}"#
        )
    };
    let events = [
        A_START.to_string(),
        block(0, r#"{"type":"text","text":""}"#),
        text(0, "The grass is "),
        block(1, r#"{"type":"text","text":""}"#),
        text(1, "green"),
        block(2, r#"{"type":"thinking","thinking":"","signature":""}"#),
        block(3, r#"{"type":"text","text":""}"#),
        text(3, "Next."),
        A_DELTA.to_string(),
        A_STOP.to_string(),
    ];
    let events: Vec<&str> = events.iter().map(String::as_str).collect();
    let mut translator =
        StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, false);
    let (_, out) = feed_all(&mut translator, &events);
    let got = super::collect::from_openai_stream(&out);
    assert_eq!(got.text, want, "{out}");
}
