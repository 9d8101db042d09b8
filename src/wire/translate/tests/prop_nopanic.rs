//! Property: no entry point panics on any JSON (or non-JSON) input — requests, answers, stream
//! events, error bodies — and a stream's output stays well-formed SSE: every event's data is
//! JSON or `[DONE]`, and nothing follows the terminal event.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::super::{
    translate_answer, translate_error, translate_request, write_request, AnswerOptions,
    RequestOptions, StreamTranslator, WireFormat,
};
use super::harness::sse_events;

/// Keys and strings the three formats use, so random values reach deep into the readers.
const KEYS: &[&str] = &[
    "model",
    "messages",
    "role",
    "content",
    "type",
    "text",
    "tool_calls",
    "function",
    "arguments",
    "name",
    "id",
    "tool_call_id",
    "image_url",
    "url",
    "source",
    "media_type",
    "data",
    "tools",
    "tool_choice",
    "input_schema",
    "parameters",
    "stream",
    "stream_options",
    "include_usage",
    "max_tokens",
    "system",
    "tool_use_id",
    "input",
    "is_error",
    "candidates",
    "parts",
    "functionCall",
    "args",
    "finishReason",
    "usageMetadata",
    "choices",
    "delta",
    "index",
    "finish_reason",
    "usage",
    "error",
    "message",
    "content_block",
    "partial_json",
    "thinking",
    "stop_reason",
    "promptFeedback",
    "blockReason",
    "thought",
    "thoughtSignature",
    "response_format",
    "json_schema",
    "schema",
    "output_config",
    "format",
    "metadata",
    "user_id",
    "stop",
    "n",
    "temperature",
    "reasoning_content",
    "refusal",
    "status",
    "code",
    "prompt_tokens",
    "input_tokens",
    "promptTokenCount",
    "inlineData",
    "cache_read_input_tokens",
];

const STRINGS: &[&str] = &[
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "text",
    "image",
    "image_url",
    "tool_use",
    "tool_result",
    "thinking",
    "base64",
    "url",
    "function",
    "auto",
    "any",
    "none",
    "required",
    "json_schema",
    "json_object",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    "ping",
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "STOP",
    "SAFETY",
    "MAX_TOKENS",
    "tool_calls",
    "length",
    "data:image/png;base64,AAAA",
    "data:x",
    "https://a.b/c.png",
    "[DONE]",
    "{",
    "{\"a\":1}",
    "call_1",
    "toolu_1__ts__AAAB",
    "overloaded_error",
    "RESOURCE_EXHAUSTED",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(STRINGS).prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..7).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Replace the node reached by following `picks` (each picks a child) with `with`.
fn mutate(v: &mut Value, picks: &[usize], with: Value) {
    let Some((&p, rest)) = picks.split_first() else {
        *v = with;
        return;
    };
    let child = match v {
        Value::Array(a) if !a.is_empty() => {
            let len = a.len();
            &mut a[p % len]
        }
        Value::Object(m) if !m.is_empty() => {
            let len = m.len();
            match m.values_mut().nth(p % len) {
                Some(c) => c,
                None => return,
            }
        }
        _ => {
            *v = with;
            return;
        }
    };
    mutate(child, rest, with);
}

/// A valid body of some format (request or answer) with one subtree replaced by random JSON.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let edit = (prop::collection::vec(any::<usize>(), 0..8), json_value());
    let valid = prop_oneof![
        (
            super::prop_request::request(),
            prop::sample::select(ALL.to_vec())
        )
            .prop_map(|(ir, f)| write_request(ir, f, &RequestOptions::new("m"))),
        super::prop_stream::answer()
            .prop_map(|a| serde_json::from_str(&a.anthropic_body()).unwrap_or_default()),
        super::prop_stream::answer()
            .prop_map(|a| serde_json::from_str(&a.openai_body()).unwrap_or_default()),
        super::prop_stream::answer()
            .prop_map(|a| serde_json::from_str(&a.gemini_body()).unwrap_or_default()),
    ];
    (valid, edit).prop_map(|(mut v, (picks, with))| {
        mutate(&mut v, &picks, with);
        v.to_string().into_bytes()
    })
}

/// Random values, valid bodies with a random edit, and random values where a request expects
/// messages and tools.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string().into_bytes()),
        mutated(),
        mutated(),
        prop::collection::vec(json_value(), 0..4).prop_map(|m| {
            serde_json::json!({"model": "m", "max_tokens": 5, "messages": m}).to_string().into_bytes()
        }),
        (json_value(), json_value()).prop_map(|(m, t)| {
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": [m]}], "tools": [t]})
                .to_string()
                .into_bytes()
        }),
        prop::collection::vec(any::<u8>(), 0..32),
    ]
}

/// Valid upstream streams (any format) with some events edited, dropped or repeated.
fn stream_events() -> impl Strategy<Value = Vec<(Option<&'static str>, String)>> {
    let edits = prop::collection::vec(
        (
            any::<usize>(),
            prop::collection::vec(any::<usize>(), 0..6),
            json_value(),
            0u8..4,
        ),
        0..4,
    );
    (super::prop_stream::answer(), 0usize..3, edits).prop_map(|(a, f, edits)| {
        let raw = match f {
            0 => a.anthropic_stream(&[3, 7], true),
            1 => a.openai_stream(&[2, 5]),
            _ => a.gemini_stream(&[4]),
        };
        // `[DONE]` stays as it is; JSON events can be edited.
        let mut ev: Vec<Result<Value, String>> = raw
            .into_iter()
            .map(|e| serde_json::from_str(&e).map_err(|_| e))
            .collect();
        for (at, picks, with, op) in edits {
            if ev.is_empty() {
                break;
            }
            let i = at % ev.len();
            match op {
                0 => drop(ev.remove(i)),
                1 => ev.insert(i, ev[i].clone()),
                _ => {
                    if let Ok(v) = &mut ev[i] {
                        mutate(v, &picks, with);
                    }
                }
            }
        }
        ev.into_iter()
            .map(|v| (None, v.map_or_else(|raw| raw, |v| v.to_string())))
            .collect()
    })
}

const ALL: [WireFormat; 3] = [
    WireFormat::OpenAi,
    WireFormat::Anthropic,
    WireFormat::Gemini,
];
const OPTS: AnswerOptions<'static> = AnswerOptions {
    created: 0,
    id_seed: "x",
    model: None,
};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn requests_answers_and_errors_never_panic(b in body(), status in 0u16..700) {
        for from in ALL {
            for to in ALL {
                let _ = translate_request(from, to, &b, &RequestOptions::new("m"));
                let _ = translate_answer(from, to, &b, &OPTS);
                let error = translate_error(from, status, &b, to);
                prop_assert!(serde_json::from_slice::<Value>(&error.body).is_ok());
                prop_assert!((400..=599).contains(&error.status), "{}", error.status);
            }
        }
    }

    #[test]
    fn streams_never_panic_and_stay_well_formed(
        events in prop_oneof![
            prop::collection::vec(
                (prop::option::of(prop::sample::select(STRINGS)), json_value().prop_map(|v| v.to_string())),
                0..12,
            ),
            stream_events(),
        ],
    ) {
        for from in ALL {
            for to in [WireFormat::OpenAi, WireFormat::Anthropic] {
                let mut translator = StreamTranslator::new(from, to, &OPTS, true);
                let mut out = Vec::new();
                let mut closed = false;
                for (name, v) in &events {
                    let before = out.len();
                    let fed = translator.feed(*name, v, &mut out);
                    prop_assert!(!(closed && out.len() > before), "output after the terminal event");
                    closed |= fed.terminal;
                }
                translator.finish(&mut out);
                let text = String::from_utf8(out).unwrap();
                for (_, data) in sse_events(&text) {
                    prop_assert!(data == "[DONE]" || serde_json::from_str::<Value>(&data).is_ok(), "{data}");
                }
            }
        }
    }
}
