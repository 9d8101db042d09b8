//! The mock's tool-call answer (`x-mock-fault: tool`): `get_weather` with `{"city": "Paris"}`
//! in the endpoint's own format — OpenAI `tool_calls` (arguments streamed in two pieces),
//! Anthropic `tool_use` (`input_json_delta` in two pieces), Gemini `functionCall` — with
//! the stop reason each provider gives a tool call.
use bytes::Bytes;

use super::json::{self, CREATED, PROMPT_TOKENS};
use super::request::Endpoint;
use super::sse::{anthropic_tail, event, SseParts};

/// The id of the call in OpenAI format.
pub const OPENAI_CALL_ID: &str = "call_mock_weather_1";
/// The id of the call in Anthropic format.
pub const ANTHROPIC_CALL_ID: &str = "toolu_mock_weather_1";
/// Output tokens of a tool-call answer.
const OUTPUT_TOKENS: usize = 7;

fn data(s: &str) -> Bytes {
    Bytes::from(format!("data: {s}\n\n"))
}

/// A whole tool-call answer for `ep`; `m` is the quoted model.
pub(crate) fn whole(ep: Endpoint, m: &str) -> String {
    match ep {
        Endpoint::Messages => format!(
            r#"{{"id":"msg_mock_tool","type":"message","role":"assistant","model":{m},"content":[{{"type":"tool_use","id":"{ANTHROPIC_CALL_ID}","name":"get_weather","input":{{"city":"Paris"}}}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{}}}"#,
            json::anthropic_usage(PROMPT_TOKENS, OUTPUT_TOKENS)
        ),
        Endpoint::Gemini { .. } => format!(
            r#"{{"candidates":[{{"content":{{"parts":[{{"functionCall":{{"name":"get_weather","args":{{"city":"Paris"}}}}}}],"role":"model"}},"finishReason":"STOP","index":0}}],"usageMetadata":{{"promptTokenCount":{PROMPT_TOKENS},"candidatesTokenCount":{OUTPUT_TOKENS},"totalTokenCount":{}}},"modelVersion":{m}}}"#,
            PROMPT_TOKENS + OUTPUT_TOKENS as u64
        ),
        _ => format!(
            r#"{{"id":"chatcmpl-mock-tool","object":"chat.completion","created":{CREATED},"model":{m},"choices":[{{"index":0,"message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"{OPENAI_CALL_ID}","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\":\"Paris\"}}"}}}}]}},"logprobs":null,"finish_reason":"tool_calls"}}],"usage":{}}}"#,
            json::openai_usage(OUTPUT_TOKENS)
        ),
    }
}

/// A streamed tool-call answer for `ep`.
pub(crate) fn stream(ep: Endpoint, m: &str, include_usage: bool) -> SseParts {
    match ep {
        Endpoint::Messages => anthropic_stream(m),
        Endpoint::Gemini { .. } => SseParts {
            head: Vec::new(),
            chunks: Vec::new(),
            tail: vec![Bytes::from(format!("data: {}\r\n\r\n", whole(ep, m)))],
        },
        _ => openai_stream(m, include_usage),
    }
}

fn openai_stream(m: &str, include_usage: bool) -> SseParts {
    let chunk = |choices: &str| {
        data(&format!(
            r#"{{"id":"chatcmpl-mock-tool","object":"chat.completion.chunk","created":{CREATED},"model":{m},"choices":{choices}}}"#
        ))
    };
    let head = vec![chunk(
        r#"[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]"#,
    )];
    let chunks = vec![
        chunk(&format!(
            r#"[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"{OPENAI_CALL_ID}","type":"function","function":{{"name":"get_weather","arguments":""}}}}]}},"finish_reason":null}}]"#
        )),
        chunk(
            r#"[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]"#,
        ),
        chunk(
            r#"[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]"#,
        ),
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

fn anthropic_stream(m: &str) -> SseParts {
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
                r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"tool_use","id":"{ANTHROPIC_CALL_ID}","name":"get_weather","input":{{}}}}}}"#
            ),
        ),
        delta(r#"{"city":"#),
        delta(r#""Paris"}"#),
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
            Endpoint::Gemini { stream: false },
        ] {
            let v: serde_json::Value = serde_json::from_str(&whole(ep, "\"m\"")).unwrap();
            assert!(v.is_object(), "{ep:?}");
        }
        for ep in [Endpoint::Chat, Endpoint::Messages] {
            let s = stream(ep, "\"m\"", true);
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
