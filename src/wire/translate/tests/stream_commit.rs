//! The commit point of translated streams (B-commit-point): which upstream events are
//! content, which errors come before any content (hidden errors: fail over), and OpenAI-format
//! events that are not JSON (dropped and counted, the stream goes on).

use super::super::{AnswerOptions, ErrorKind, StreamStep, StreamTranslator, WireFormat};

const OPTS: AnswerOptions<'static> = AnswerOptions {
    created: 1,
    id_seed: "s",
    model: None,
};

fn feed_all(t: &mut StreamTranslator, events: &[&str]) -> (Vec<StreamStep>, String) {
    let mut out = Vec::new();
    let steps = events.iter().map(|d| t.feed(None, d, &mut out)).collect();
    (steps, String::from_utf8(out).unwrap_or_default())
}

fn content_flags(steps: &[StreamStep]) -> Vec<bool> {
    steps.iter().map(|s| s.content).collect()
}

const A_START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#;
const A_PING: &str = r#"{"type":"ping"}"#;
const A_TEXT_START: &str =
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
const A_THINK_START: &str = r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#;
const A_THINK: &str =
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#;
const A_TEXT: &str =
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#;
const A_OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

#[test]
fn anthropic_preamble_pings_and_empty_block_starts_are_not_content() {
    for (start, delta) in [(A_TEXT_START, A_TEXT), (A_THINK_START, A_THINK)] {
        let mut translator =
            StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, true);
        let (steps, _) = feed_all(&mut translator, &[A_START, A_PING, start, A_PING, delta]);
        assert_eq!(content_flags(&steps), [false, false, false, false, true]);
        assert!(steps.iter().all(|s| s.error.is_none() && !s.terminal));
    }
}

#[test]
fn anthropic_overload_after_the_preamble_and_an_empty_block_is_hidden() {
    let mut translator =
        StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, false);
    let (steps, out) = feed_all(
        &mut translator,
        &[A_START, A_PING, A_TEXT_START, A_OVERLOADED],
    );
    let last = &steps[3];
    assert_eq!(
        last.error.as_ref().map(|e| e.kind),
        Some(ErrorKind::Overloaded)
    );
    assert!(last.error_before_content && last.terminal);
    assert!(out.contains("overloaded_error"), "{out}");

    // After content it is not hidden.
    let mut translator =
        StreamTranslator::new(WireFormat::Anthropic, WireFormat::OpenAi, &OPTS, false);
    let (steps, _) = feed_all(
        &mut translator,
        &[A_START, A_TEXT_START, A_TEXT, A_OVERLOADED],
    );
    assert!(steps[3].error.is_some() && !steps[3].error_before_content);
}

fn chunk(delta: &str, finish: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]}}"#
    )
}

/// Azure's first chunk: no choices, only the prompt's content-filter results.
const AZURE_FILTER: &str = r#"{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}"#;

#[test]
fn openai_chunks_without_content_are_not_content() {
    let role = chunk(
        r#"{"role":"assistant","content":"","refusal":null}"#,
        "null",
    );
    let empty = chunk("{}", "null");
    let empty_reasoning = chunk(r#"{"reasoning_content":""}"#, "null");
    let text = chunk(r#"{"content":"hi"}"#, "null");
    for to in [WireFormat::Anthropic, WireFormat::OpenAi] {
        let mut translator = StreamTranslator::new(WireFormat::OpenAi, to, &OPTS, false);
        let events = [AZURE_FILTER, &role, &empty, &empty_reasoning, &text];
        let (steps, _) = feed_all(&mut translator, &events);
        assert_eq!(
            content_flags(&steps),
            [false, false, false, false, true],
            "{to:?}"
        );
    }
}

#[test]
fn an_openai_error_right_after_the_preamble_is_hidden() {
    let role = chunk(r#"{"role":"assistant","content":""}"#, "null");
    let err =
        r#"{"error":{"message":"The server is overloaded","type":"overloaded_error","code":null}}"#;
    let mut translator =
        StreamTranslator::new(WireFormat::OpenAi, WireFormat::Anthropic, &OPTS, false);
    let (steps, out) = feed_all(&mut translator, &[AZURE_FILTER, &role, err]);
    let error = steps[2].error.as_ref().expect("error reported");
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert!(steps[2].error_before_content && steps[2].terminal);
    assert!(out.contains("event: error"), "{out}");
}

#[test]
fn openai_events_that_are_not_json_are_dropped_and_counted() {
    let text = chunk(r#"{"content":"hi"}"#, "null");
    let stop = chunk("{}", r#""stop""#);
    let mut translator =
        StreamTranslator::new(WireFormat::OpenAi, WireFormat::Anthropic, &OPTS, false);
    let (steps, out) = feed_all(
        &mut translator,
        &["keep-alive", &text, "{truncated", &stop, "[DONE]"],
    );
    assert_eq!(steps[0], StreamStep::default());
    assert_eq!(steps[2], StreamStep::default());
    assert!(steps[1].content);
    assert!(steps[4].terminal && steps.iter().all(|s| s.error.is_none()));
    assert_eq!(translator.malformed_dropped(), 2);
    assert!(out.contains(r#""text":"hi""#), "{out}");

    // JSON that is not a chunk is still an unreadable answer.
    let mut translator =
        StreamTranslator::new(WireFormat::OpenAi, WireFormat::OpenAi, &OPTS, false);
    let (steps, _) = feed_all(&mut translator, &["[1,2]"]);
    let error = steps[0].error.as_ref().expect("unreadable chunk");
    assert_eq!(
        (error.kind, error.client_status(WireFormat::OpenAi)),
        (ErrorKind::Api, 502)
    );
    assert_eq!(translator.malformed_dropped(), 0);
}
