//! Streamed (SSE) answers of the mock upstream: OpenAI chat and completions chunks, Responses
//! API events, Anthropic message events; each split into head, content chunks and tail.
use bytes::Bytes;

use super::json::{self, CREATED, PROMPT_TOKENS};
use super::request::Endpoint;

/// An SSE answer: `head` events, one event per content chunk, then the `tail` (the terminal
/// events: finish chunk, usage, `[DONE]` / `message_stop` / `response.completed`).
pub(crate) struct SseParts {
    pub head: Vec<Bytes>,
    pub chunks: Vec<Bytes>,
    pub tail: Vec<Bytes>,
}

/// The SSE comment sent by `KeepaliveThenOk`.
pub(crate) const KEEPALIVE: &[u8] = b": keepalive\n\n";
const DONE: &[u8] = b"data: [DONE]\n\n";

fn data(json: &str) -> Bytes {
    let mut s = String::with_capacity(json.len() + 8);
    s.push_str("data: ");
    s.push_str(json);
    s.push_str("\n\n");
    Bytes::from(s)
}

pub(crate) fn event(name: &str, json: &str) -> Bytes {
    let mut s = String::with_capacity(json.len() + name.len() + 16);
    s.push_str("event: ");
    s.push_str(name);
    s.push_str("\ndata: ");
    s.push_str(json);
    s.push_str("\n\n");
    Bytes::from(s)
}

fn chunk_text(i: usize) -> String {
    let mut s = String::with_capacity(10);
    json::push_chunk_text(&mut s, i);
    s
}

/// The stream for `ep` with `n` content chunks; `m` is the quoted model.
pub(crate) fn render(ep: Endpoint, m: &str, n: usize, include_usage: bool) -> SseParts {
    match ep {
        Endpoint::Completions => completions(m, n, include_usage),
        Endpoint::Responses => responses(m, n),
        Endpoint::Messages => messages(m, n),
        _ => chat(m, n, include_usage),
    }
}

fn chat_chunk(m: &str, choices: &str) -> Bytes {
    data(&format!(
        r#"{{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":{CREATED},"model":{m},"choices":{choices}}}"#
    ))
}

fn chat(m: &str, n: usize, include_usage: bool) -> SseParts {
    let head = vec![chat_chunk(
        m,
        r#"[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]"#,
    )];
    let chunks = (0..n)
        .map(|i| {
            chat_chunk(
                m,
                &format!(
                    r#"[{{"index":0,"delta":{{"content":"{}"}},"finish_reason":null}}]"#,
                    chunk_text(i)
                ),
            )
        })
        .collect();
    let mut tail = vec![chat_chunk(
        m,
        r#"[{"index":0,"delta":{},"finish_reason":"stop"}]"#,
    )];
    if include_usage {
        tail.push(data(&format!(
            r#"{{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":{CREATED},"model":{m},"choices":[],"usage":{}}}"#,
            json::openai_usage(n)
        )));
    }
    tail.push(Bytes::from_static(DONE));
    SseParts { head, chunks, tail }
}

fn completions(m: &str, n: usize, include_usage: bool) -> SseParts {
    let one = |text: &str, finish: &str| {
        data(&format!(
            r#"{{"id":"cmpl-mock","object":"text_completion","created":{CREATED},"model":{m},"choices":[{{"text":"{text}","index":0,"logprobs":null,"finish_reason":{finish}}}]}}"#
        ))
    };
    let chunks = (0..n).map(|i| one(&chunk_text(i), "null")).collect();
    let mut tail = vec![one("", r#""stop""#)];
    if include_usage {
        tail.push(data(&format!(
            r#"{{"id":"cmpl-mock","object":"text_completion","created":{CREATED},"model":{m},"choices":[],"usage":{}}}"#,
            json::openai_usage(n)
        )));
    }
    tail.push(Bytes::from_static(DONE));
    SseParts {
        head: Vec::new(),
        chunks,
        tail,
    }
}

/// The Responses stream as OpenAI sends it: `response.created`, the message item and its
/// text part opened (`response.output_item.added`, `response.content_part.added`, written
/// with the first delta so the content chunks keep their count), `response.output_text.delta`
/// per chunk, then the part, the text and the item closed and `response.completed`.
fn responses(m: &str, n: usize) -> SseParts {
    let created = json::responses_object(m, 0, "in_progress", false);
    let head = vec![event(
        "response.created",
        &format!(r#"{{"type":"response.created","sequence_number":0,"response":{created}}}"#),
    )];
    let opening = r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_mock","status":"in_progress","role":"assistant","content":[]}}"#;
    let part = r#"{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_mock","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#;
    let chunks = (0..n)
        .map(|i| {
            let delta = event(
                "response.output_text.delta",
                &format!(
                    r#"{{"type":"response.output_text.delta","sequence_number":{},"item_id":"msg_mock","output_index":0,"content_index":0,"delta":"{}"}}"#,
                    i + 3,
                    chunk_text(i)
                ),
            );
            match i {
                0 => {
                    let mut b = event("response.output_item.added", opening).to_vec();
                    b.extend_from_slice(&event("response.content_part.added", part));
                    b.extend_from_slice(&delta);
                    Bytes::from(b)
                }
                _ => delta,
            }
        })
        .collect();
    let text = json::quote(&json::full_text(n));
    let seq = n + 3;
    let done = json::responses_object(m, n, "completed", true);
    let mut tail = Vec::new();
    if n > 0 {
        tail.push(event(
            "response.output_text.done",
            &format!(r#"{{"type":"response.output_text.done","sequence_number":{seq},"item_id":"msg_mock","output_index":0,"content_index":0,"text":{text}}}"#),
        ));
        tail.push(event(
            "response.content_part.done",
            &format!(r#"{{"type":"response.content_part.done","sequence_number":{},"item_id":"msg_mock","output_index":0,"content_index":0,"part":{{"type":"output_text","text":{text},"annotations":[]}}}}"#, seq + 1),
        ));
        tail.push(event(
            "response.output_item.done",
            &format!(r#"{{"type":"response.output_item.done","sequence_number":{},"output_index":0,"item":{{"type":"message","id":"msg_mock","status":"completed","role":"assistant","content":[{{"type":"output_text","text":{text},"annotations":[]}}]}}}}"#, seq + 2),
        ));
    }
    tail.push(event(
        "response.completed",
        &format!(
            r#"{{"type":"response.completed","sequence_number":{},"response":{done}}}"#,
            seq + 3
        ),
    ));
    SseParts { head, chunks, tail }
}

fn messages(m: &str, n: usize) -> SseParts {
    let head = vec![
        event(
            "message_start",
            &format!(
                r#"{{"type":"message_start","message":{{"id":"msg_mock","type":"message","role":"assistant","model":{m},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{}}}}}"#,
                json::anthropic_usage(PROMPT_TOKENS, 1)
            ),
        ),
        event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        ),
        event("ping", r#"{"type": "ping"}"#),
    ];
    let chunks = (0..n)
        .map(|i| {
            event(
                "content_block_delta",
                &format!(
                    r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{}"}}}}"#,
                    chunk_text(i)
                ),
            )
        })
        .collect();
    let tail = anthropic_tail("end_turn", n);
    SseParts { head, chunks, tail }
}

/// The closing events of an Anthropic stream whose one content block is at index 0:
/// `content_block_stop`, `message_delta` with `stop_reason` and the output tokens, and
/// `message_stop`.
pub(crate) fn anthropic_tail(
    stop_reason: &str,
    output_tokens: impl std::fmt::Display,
) -> Vec<Bytes> {
    vec![
        event(
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        ),
        event(
            "message_delta",
            &format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop_reason}","stop_sequence":null}},"usage":{{"output_tokens":{output_tokens}}}}}"#
            ),
        ),
        event("message_stop", r#"{"type":"message_stop"}"#),
    ]
}

/// The first (and only) event of a streamed `HiddenError`.
pub(crate) fn hidden_error(ep: Endpoint, code: Option<u16>) -> Bytes {
    if ep.gemini() {
        return super::gemini::error_event(code.unwrap_or(500));
    }
    let body = json::hidden_error(code, ep.anthropic());
    match ep {
        Endpoint::Messages | Endpoint::Responses => event("error", &body),
        _ => data(&body),
    }
}

/// The events of an `ErrorAfterStart`: the stream's opening (Anthropic `message_start` and a
/// `ping`, the Responses `response.created`, the chat role chunk), then an error event.
pub(crate) fn error_after_start(ep: Endpoint, head: Vec<Bytes>, code: u16) -> Vec<Bytes> {
    let mut v: Vec<Bytes> = head.into_iter().take(1).collect();
    if ep == Endpoint::Messages {
        v.push(event("ping", r#"{"type": "ping"}"#));
    }
    v.extend(error_event(ep, code));
    v
}

/// The dialect's error event in a stream, as the provider reports an overload.
pub(crate) fn error_event(ep: Endpoint, code: u16) -> Vec<Bytes> {
    let mut v = Vec::with_capacity(1);
    match ep {
        Endpoint::Messages => {
            let kind = json::anthropic_type(code);
            v.push(event("error", &json::anthropic_error(kind, "Overloaded")));
        }
        Endpoint::Gemini { .. } => v.push(super::gemini::error_event(code)),
        Endpoint::Responses => v.push(event(
            "error",
            r#"{"type":"error","code":"server_error","message":"mock upstream error after start","param":null}"#,
        )),
        _ => v.push(data(&format!(
            r#"{{"error":{{"message":"mock upstream error after start","type":"server_error","code":"{code}"}}}}"#
        ))),
    }
    v
}
