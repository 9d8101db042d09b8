//! Table tests for stream policies: body edits, assembly of streams, replay of answers (R9.6).
use super::assemble::Assembler;
use super::*;
use crate::wire::dialect::is_usage_chunk;
use crate::wire::sse::{Event, Framer};

fn peeked(body: &str) -> (Bytes, Peek) {
    let bytes = Bytes::from(body.to_string());
    let peeked = request::peek(&bytes).unwrap();
    (bytes, peeked)
}

fn plan_for(policy: StreamPolicy, path: &str, body: &str) -> Plan {
    let (b, p) = peeked(body);
    plan_with(policy, true, path, Some(&p), b)
}

fn json(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b).unwrap()
}

fn events(text: &[u8]) -> Vec<Event> {
    let mut framer = Framer::new(true);
    framer.push(text);
    std::iter::from_fn(|| framer.next_event()).collect()
}

#[test]
fn modes_per_policy_and_client() {
    use StreamPolicy::*;
    let cases = [
        (Passthrough, true, Mode::Pass),
        (Passthrough, false, Mode::Pass),
        (ForceStream, false, Mode::Assemble),
        (ForceStream, true, Mode::Pass),
        (ForceNonStream, true, Mode::Replay),
        (ForceNonStream, false, Mode::Pass),
    ];
    for (policy, stream, want) in cases {
        let body = format!(r#"{{"model":"m","stream":{stream}}}"#);
        assert_eq!(plan_for(policy, "/v1/chat/completions", &body).mode, want);
        assert_eq!(plan_for(policy, "/v1/messages", &body).mode, want);
        assert_eq!(plan_for(policy, "/v1/responses", &body).mode, want);
        // Other paths pass through untouched.
        let plan = plan_for(policy, "/v1/completions", &body);
        assert_eq!((plan.mode, &plan.body[..]), (Mode::Pass, body.as_bytes()));
    }
}

#[test]
fn stream_field_is_replaced_or_inserted() {
    let plan = plan_for(
        StreamPolicy::ForceStream,
        "/v1/messages",
        r#"{"model":"m", "stream" : false, "x":1}"#,
    );
    assert_eq!(&plan.body[..], br#"{"model":"m", "stream" : true, "x":1}"#);
    let plan = plan_for(
        StreamPolicy::ForceStream,
        "/v1/messages",
        r#" {"model":"m"}"#,
    );
    assert_eq!(&plan.body[..], br#" {"stream":true,"model":"m"}"#);
    let plan = plan_for(
        StreamPolicy::ForceNonStream,
        "/v1/messages",
        r#"{"stream":true,"model":"m"}"#,
    );
    assert_eq!(&plan.body[..], br#"{"stream":false,"model":"m"}"#);
    assert_eq!(
        &with_stream(&Bytes::from_static(b"{ }"), true)[..],
        b"{\"stream\":true }"
    );
}

#[test]
fn include_usage_is_requested_for_chat_streams_and_hidden() {
    let plan = plan_for(
        StreamPolicy::Passthrough,
        "/v1/chat/completions",
        r#"{"model":"m","stream":true}"#,
    );
    assert!(plan.hide_usage_chunk);
    let sent = json(&plan.body);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(sent["model"], "m");
    // Other stream options survive; an explicit false is overridden.
    let plan = plan_for(
        StreamPolicy::Passthrough,
        "/v1/chat/completions",
        r#"{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}"#,
    );
    let sent = json(&plan.body);
    assert_eq!(
        sent["stream_options"],
        serde_json::json!({"include_usage": true, "x": 1})
    );
    assert!(plan.hide_usage_chunk);
    // The client asked itself: nothing changes and nothing is hidden.
    let body = r#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#;
    let plan = plan_for(StreamPolicy::Passthrough, "/v1/chat/completions", body);
    assert_eq!(
        (&plan.body[..], plan.hide_usage_chunk),
        (body.as_bytes(), false)
    );
    assert!(plan.client_include_usage);
    // Non-stream and messages: untouched.
    let body = r#"{"model":"m"}"#;
    let plan = plan_for(StreamPolicy::Passthrough, "/v1/chat/completions", body);
    assert_eq!(&plan.body[..], body.as_bytes());
    let plan = plan_for(
        StreamPolicy::Passthrough,
        "/v1/messages",
        r#"{"model":"m","stream":true}"#,
    );
    assert_eq!(&plan.body[..], br#"{"model":"m","stream":true}"#);
    // force_stream asks for usage too (the assembled answer carries it), nothing to hide.
    let plan = plan_for(StreamPolicy::ForceStream, "/v1/chat/completions", body);
    let body = json(&plan.body);
    assert_eq!(
        (
            body["stream"].clone(),
            body["stream_options"]["include_usage"].clone()
        ),
        (true.into(), true.into())
    );
    assert!(!plan.hide_usage_chunk);
}

#[test]
fn usage_chunk_detection() {
    let ev = |d: &str| events(format!("data: {d}\n\n").as_bytes()).remove(0);
    assert!(is_usage_chunk(&ev(
        r#"{"choices":[],"usage":{"prompt_tokens":1}}"#
    )));
    assert!(!is_usage_chunk(&ev(
        r#"{"choices":[{"delta":{}}],"usage":{"prompt_tokens":1}}"#
    )));
    assert!(!is_usage_chunk(&ev(r#"{"choices":[],"usage":null}"#)));
    assert!(!is_usage_chunk(&ev("[DONE]")));
}

const CHAT_STREAM: &str = concat!(
    "data: {\"id\":\"c1\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":4}}\n\n",
    "data: [DONE]\n\n",
);

#[test]
fn chat_stream_assembles_into_one_completion() {
    let mut assembler = Assembler::new(Dialect::Chat);
    for ev in events(CHAT_STREAM.as_bytes()) {
        assembler.event(&ev);
    }
    let answer = assembler.finish();
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(
        (answer["id"].as_str(), answer["created"].as_u64()),
        (Some("c1"), Some(5))
    );
    let choice = &answer["choices"][0];
    assert_eq!(choice["message"]["content"], "Hello");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["finish_reason"], "tool_calls");
    let tc = &choice["message"]["tool_calls"][0];
    assert_eq!(tc["id"], "call_1");
    assert_eq!(tc["function"]["name"], "get");
    assert_eq!(tc["function"]["arguments"], "{\"a\":1}");
    assert_eq!(answer["usage"]["completion_tokens"], 4);
}

const MSG_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"tu_1\",\"name\":\"get\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"2}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":12}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[test]
fn messages_stream_assembles_into_one_message() {
    let mut assembler = Assembler::new(Dialect::Messages);
    for ev in events(MSG_STREAM.as_bytes()) {
        assembler.event(&ev);
    }
    let answer = assembler.finish();
    assert_eq!(
        (answer["id"].as_str(), answer["type"].as_str()),
        (Some("msg_1"), Some("message"))
    );
    assert_eq!(
        answer["content"][0],
        serde_json::json!({"type":"text","text":"Hi there"})
    );
    assert_eq!(answer["content"][1]["input"], serde_json::json!({"a": 2}));
    assert_eq!(answer["content"][1]["name"], "get");
    assert_eq!(answer["stop_reason"], "tool_use");
    assert_eq!(
        (
            answer["usage"]["input_tokens"].as_u64(),
            answer["usage"]["output_tokens"].as_u64()
        ),
        (Some(9), Some(12))
    );
}

#[test]
fn replay_then_assemble_round_trips() {
    use crate::wire::dialect::{is_terminal, StreamFormat};
    // Assemble the reference streams, replay the answers, assemble again: same answer, and the
    // replayed stream ends with its terminal event.
    for (d, fmt, text) in [
        (Dialect::Chat, StreamFormat::Chat, CHAT_STREAM),
        (Dialect::Messages, StreamFormat::Messages, MSG_STREAM),
    ] {
        let mut assembler = Assembler::new(d);
        events(text.as_bytes())
            .iter()
            .for_each(|e| assembler.event(e));
        let answer = assembler.finish();
        let sse = replay::replay(d, answer.to_string().as_bytes(), true).unwrap();
        let evs = events(&sse);
        assert!(is_terminal(fmt, evs.last().unwrap()), "{d:?}");
        let mut assembler = Assembler::new(d);
        evs.iter().for_each(|e| assembler.event(e));
        assert_eq!(assembler.finish(), answer, "{d:?}");
    }
    // Without include_usage the chat replay has no usage chunk.
    let sse = replay::replay(Dialect::Chat, br#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}"#, false).unwrap();
    assert!(events(&sse).iter().all(|e| !is_usage_chunk(e)));
    assert!(replay::replay(Dialect::Chat, b"not json", false).is_none());
}
