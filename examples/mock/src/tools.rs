//! The mock's tool-call answers: `get_weather` with `{"city": "Paris"}` for `x-mock-fault:
//! tool`, or the call a scripted conversation makes ([`Call`]), in the endpoint's own format
//! — OpenAI `tool_calls` (arguments streamed in two pieces), Anthropic `tool_use`
//! (`input_json_delta` in two pieces), Responses `function_call` items (argument deltas),
//! Gemini `functionCall` — with the stop reason each provider gives a tool call.
use bytes::Bytes;

use super::json::{self, CREATED, PROMPT_TOKENS};
use super::request::Endpoint;
use super::sse::{anthropic_tail, event, SseParts};

/// The id of the call in OpenAI format.
pub const OPENAI_CALL_ID: &str = "call_mock_weather_1";
/// The id of the call in Anthropic format.
pub const ANTHROPIC_CALL_ID: &str = "toolu_mock_weather_1";
/// The id of the call in Responses format (the item id is `fc_mock_1`).
pub const RESPONSES_CALL_ID: &str = "call_mock_1";
/// Output tokens of a tool-call answer.
const OUTPUT_TOKENS: usize = 7;

/// One function call: the tool's name and its arguments as a JSON object's text.
pub(crate) struct Call {
    pub name: String,
    pub args: String,
}

impl Call {
    /// The call of `x-mock-fault: tool`.
    pub(crate) fn weather() -> Call {
        Call {
            name: "get_weather".into(),
            args: r#"{"city":"Paris"}"#.into(),
        }
    }

    /// The arguments in two pieces, as they stream.
    fn halves(&self) -> (&str, &str) {
        let mut mid = self.args.len() / 2;
        while !self.args.is_char_boundary(mid) {
            mid += 1;
        }
        self.args.split_at(mid)
    }
}

fn data(s: &str) -> Bytes {
    Bytes::from(format!("data: {s}\n\n"))
}

/// A whole tool-call answer for `ep`; `m` is the quoted model.
pub(crate) fn whole(ep: Endpoint, m: &str, c: &Call) -> String {
    let (name, args) = (json::quote(&c.name), &c.args);
    match ep {
        Endpoint::Messages => format!(
            r#"{{"id":"msg_mock_tool","type":"message","role":"assistant","model":{m},"content":[{{"type":"tool_use","id":"{ANTHROPIC_CALL_ID}","name":{name},"input":{args}}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{}}}"#,
            json::anthropic_usage(PROMPT_TOKENS, OUTPUT_TOKENS)
        ),
        Endpoint::Gemini { .. } => format!(
            r#"{{"candidates":[{{"content":{{"parts":[{{"functionCall":{{"name":{name},"args":{args}}}}}],"role":"model"}},"finishReason":"STOP","index":0}}],"usageMetadata":{{"promptTokenCount":{PROMPT_TOKENS},"candidatesTokenCount":{OUTPUT_TOKENS},"totalTokenCount":{}}},"modelVersion":{m}}}"#,
            PROMPT_TOKENS + OUTPUT_TOKENS as u64
        ),
        Endpoint::Responses => responses_object(m, c, "completed"),
        _ => format!(
            r#"{{"id":"chatcmpl-mock-tool","object":"chat.completion","created":{CREATED},"model":{m},"choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"{OPENAI_CALL_ID}","type":"function","function":{{"name":{name},"arguments":{}}}}}]}},"logprobs":null,"finish_reason":"tool_calls"}}],"usage":{}}}"#,
            json::quote(args),
            json::openai_usage(OUTPUT_TOKENS)
        ),
    }
}

/// A streamed tool-call answer for `ep`.
pub(crate) fn stream(ep: Endpoint, m: &str, include_usage: bool, c: &Call) -> SseParts {
    match ep {
        Endpoint::Messages => anthropic_stream(m, c),
        Endpoint::Gemini { .. } => SseParts {
            head: Vec::new(),
            chunks: Vec::new(),
            tail: vec![Bytes::from(format!("data: {}\r\n\r\n", whole(ep, m, c)))],
        },
        Endpoint::Responses => responses_stream(m, c),
        _ => openai_stream(m, include_usage, c),
    }
}

/// A Responses object whose output is the call (`status` completed) or empty.
fn responses_object(m: &str, c: &Call, status: &str) -> String {
    let done = status == "completed";
    let output = match done {
        true => format!("[{}]", responses_item(c, &c.args, "completed")),
        false => "[]".into(),
    };
    let usage = match done {
        true => format!(
            r#"{{"input_tokens":{PROMPT_TOKENS},"input_tokens_details":{{"cached_tokens":0}},"output_tokens":{OUTPUT_TOKENS},"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":{}}}"#,
            PROMPT_TOKENS + OUTPUT_TOKENS as u64
        ),
        false => "null".into(),
    };
    format!(
        r#"{{"id":"resp_mock_tool","object":"response","created_at":{CREATED},"status":"{status}","model":{m},"output":{output},"usage":{usage}}}"#
    )
}

fn responses_item(c: &Call, args: &str, status: &str) -> String {
    format!(
        r#"{{"type":"function_call","id":"fc_mock_1","call_id":"{RESPONSES_CALL_ID}","name":{},"arguments":{},"status":"{status}"}}"#,
        json::quote(&c.name),
        json::quote(args)
    )
}

fn responses_stream(m: &str, c: &Call) -> SseParts {
    let ev = |name: &str, seq: usize, rest: String| {
        event(
            name,
            &format!(r#"{{"type":"{name}","sequence_number":{seq},{rest}}}"#),
        )
    };
    let head = vec![ev(
        "response.created",
        0,
        format!(r#""response":{}"#, responses_object(m, c, "in_progress")),
    )];
    let (a, b) = c.halves();
    let delta = |seq: usize, piece: &str| {
        ev(
            "response.function_call_arguments.delta",
            seq,
            format!(
                r#""item_id":"fc_mock_1","output_index":0,"delta":{}"#,
                json::quote(piece)
            ),
        )
    };
    let chunks = vec![
        ev(
            "response.output_item.added",
            1,
            format!(
                r#""output_index":0,"item":{}"#,
                responses_item(c, "", "in_progress")
            ),
        ),
        delta(2, a),
        delta(3, b),
    ];
    let tail = vec![
        ev(
            "response.function_call_arguments.done",
            4,
            format!(
                r#""item_id":"fc_mock_1","output_index":0,"arguments":{}"#,
                json::quote(&c.args)
            ),
        ),
        ev(
            "response.output_item.done",
            5,
            format!(
                r#""output_index":0,"item":{}"#,
                responses_item(c, &c.args, "completed")
            ),
        ),
        ev(
            "response.completed",
            6,
            format!(r#""response":{}"#, responses_object(m, c, "completed")),
        ),
    ];
    SseParts { head, chunks, tail }
}

fn openai_stream(m: &str, include_usage: bool, c: &Call) -> SseParts {
    let chunk = |choices: &str| {
        data(&format!(
            r#"{{"id":"chatcmpl-mock-tool","object":"chat.completion.chunk","created":{CREATED},"model":{m},"choices":{choices}}}"#
        ))
    };
    let head = vec![chunk(
        r#"[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]"#,
    )];
    let piece = |p: &str| {
        chunk(&format!(
            r#"[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":{}}}}}]}},"finish_reason":null}}]"#,
            json::quote(p)
        ))
    };
    let (a, b) = c.halves();
    let chunks = vec![
        chunk(&format!(
            r#"[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"{OPENAI_CALL_ID}","type":"function","function":{{"name":{},"arguments":""}}}}]}},"finish_reason":null}}]"#,
            json::quote(&c.name)
        )),
        piece(a),
        piece(b),
    ];
    let mut tail = vec![chunk(
        r#"[{"index":0,"delta":{},"finish_reason":"tool_calls"}]"#,
    )];
    if include_usage {
        tail.push(data(&format!(
            r#"{{"id":"chatcmpl-mock-tool","object":"chat.completion.chunk","created":{CREATED},"model":{m},"choices":[],"usage":{}}}"#,
            json::openai_usage(OUTPUT_TOKENS)
        )));
    }
    tail.push(Bytes::from_static(b"data: [DONE]\n\n"));
    SseParts { head, chunks, tail }
}

fn anthropic_stream(m: &str, c: &Call) -> SseParts {
    let head = vec![event(
        "message_start",
        &format!(
            r#"{{"type":"message_start","message":{{"id":"msg_mock_tool","type":"message","role":"assistant","model":{m},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{}}}}}"#,
            json::anthropic_usage(PROMPT_TOKENS, 1)
        ),
    )];
    let delta = |piece: &str| {
        event(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{}}}}}"#,
                json::quote(piece)
            ),
        )
    };
    let chunks = vec![
        event(
            "content_block_start",
            &format!(
                r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"tool_use","id":"{ANTHROPIC_CALL_ID}","name":{},"input":{{}}}}}}"#,
                json::quote(&c.name)
            ),
        ),
        delta(c.halves().0),
        delta(c.halves().1),
    ];
    let tail = anthropic_tail("tool_use", OUTPUT_TOKENS);
    SseParts { head, chunks, tail }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_json() {
        for ep in [
            Endpoint::Chat,
            Endpoint::Messages,
            Endpoint::Responses,
            Endpoint::Gemini { stream: false },
        ] {
            let v: serde_json::Value =
                serde_json::from_str(&whole(ep, "\"m\"", &Call::weather())).unwrap();
            assert!(v.is_object(), "{ep:?}");
        }
        for ep in [Endpoint::Chat, Endpoint::Messages, Endpoint::Responses] {
            let s = stream(ep, "\"m\"", true, &Call::weather());
            for e in s.head.iter().chain(&s.chunks).chain(&s.tail) {
                let text = std::str::from_utf8(e).unwrap();
                let d = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                if d != "[DONE]" {
                    serde_json::from_str::<serde_json::Value>(d).unwrap();
                }
            }
        }
    }
}
