//! Test helpers for the stream property: the client's answer put back together from a
//! non-stream body or from stream events, asserting each client format's event grammar.

use serde_json::{json, Value};

use super::harness::sse_events;

/// A client-side answer, whichever way it arrived.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Got {
    pub text: String,
    pub reasoning: String,
    pub calls: Vec<(String, String, Value)>,
    pub stop: String,
    pub usage: Option<(u64, u64, u64)>,
}

fn args_value(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("tool arguments are not JSON ({e}): {s}"))
}

pub fn from_openai_body(body: &[u8]) -> Got {
    let parsed: Value = serde_json::from_slice(body).unwrap();
    let message = &parsed["choices"][0]["message"];
    let calls = message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["function"]["name"].as_str().unwrap().to_string(),
                args_value(c["function"]["arguments"].as_str().unwrap()),
            )
        })
        .collect();
    Got {
        text: message["content"].as_str().unwrap_or("").to_string(),
        reasoning: message["reasoning_content"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        calls,
        stop: parsed["choices"][0]["finish_reason"]
            .as_str()
            .unwrap()
            .to_string(),
        usage: openai_usage(&parsed["usage"]),
    }
}

fn openai_usage(usage: &Value) -> Option<(u64, u64, u64)> {
    usage.is_object().then(|| {
        (
            usage["prompt_tokens"].as_u64().unwrap(),
            usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap(),
            usage["completion_tokens"].as_u64().unwrap(),
        )
    })
}

/// Rebuild an OpenAI client's answer from chunks, asserting the chunk grammar on the way.
pub fn from_openai_stream(sse: &str) -> Got {
    let events = sse_events(sse);
    let (last, chunks) = events.split_last().expect("events");
    assert_eq!(last.1, "[DONE]", "{sse}");
    let mut got = Got::default();
    let mut args: Vec<String> = Vec::new();
    for (_, data) in chunks {
        let parsed: Value = serde_json::from_str(data).unwrap();
        assert_eq!(parsed["object"], "chat.completion.chunk", "{data}");
        if parsed["choices"].as_array().is_some_and(Vec::is_empty) {
            got.usage = openai_usage(&parsed["usage"]);
            continue;
        }
        let choice = &parsed["choices"][0];
        let delta = &choice["delta"];
        got.text.push_str(delta["content"].as_str().unwrap_or(""));
        got.reasoning
            .push_str(delta["reasoning_content"].as_str().unwrap_or(""));
        for tc in delta["tool_calls"].as_array().cloned().unwrap_or_default() {
            let i = tc["index"].as_u64().unwrap() as usize;
            if i == got.calls.len() {
                // The first fragment of an index, and only it, names the call.
                let id = tc["id"]
                    .as_str()
                    .expect("id in the first fragment")
                    .to_string();
                let name = tc["function"]["name"]
                    .as_str()
                    .expect("name in the first fragment")
                    .to_string();
                assert_eq!(tc["type"], "function");
                got.calls.push((id, name, Value::Null));
                args.push(String::new());
            } else {
                assert!(
                    tc.get("id").is_none() && tc["function"].get("name").is_none(),
                    "{data}"
                );
            }
            args[i].push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            got.stop = f.to_string();
        }
    }
    for (call, a) in got.calls.iter_mut().zip(&args) {
        call.2 = args_value(a);
    }
    got
}

pub fn from_anthropic_body(body: &[u8]) -> Got {
    let parsed: Value = serde_json::from_slice(body).unwrap();
    let mut got = Got {
        stop: parsed["stop_reason"].as_str().unwrap().to_string(),
        ..Got::default()
    };
    for b in parsed["content"].as_array().unwrap() {
        match b["type"].as_str().unwrap() {
            "text" => got.text.push_str(b["text"].as_str().unwrap()),
            "thinking" => got.reasoning.push_str(b["thinking"].as_str().unwrap()),
            "tool_use" => got.calls.push((
                b["id"].as_str().unwrap().into(),
                b["name"].as_str().unwrap().into(),
                b["input"].clone(),
            )),
            t => panic!("block {t}"),
        }
    }
    got.usage = anthropic_usage(&parsed["usage"]);
    got
}

fn anthropic_usage(usage: &Value) -> Option<(u64, u64, u64)> {
    let count_of = |k: &str| usage[k].as_u64().unwrap_or(0);
    let cached = count_of("cache_read_input_tokens");
    Some((
        count_of("input_tokens") + cached + count_of("cache_creation_input_tokens"),
        cached,
        count_of("output_tokens"),
    ))
}

/// Rebuild an Anthropic client's answer from events, asserting the event grammar: one open
/// block at a time, indices in order, deltas to the open block, message_stop last.
pub fn from_anthropic_stream(sse: &str) -> Got {
    let events = sse_events(sse);
    assert_eq!(
        events.first().and_then(|e| e.0.as_deref()),
        Some("message_start"),
        "{sse}"
    );
    assert_eq!(
        events.last().and_then(|e| e.0.as_deref()),
        Some("message_stop"),
        "{sse}"
    );
    let mut got = Got::default();
    let (mut open, mut next): (Option<(u64, String)>, u64) = (None, 0);
    let mut args = String::new();
    for (name, data) in &events {
        let parsed: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            parsed["type"].as_str(),
            name.as_deref(),
            "event name matches type"
        );
        let idx = parsed["index"].as_u64();
        match name.as_deref().unwrap() {
            "content_block_start" => {
                assert!(open.is_none(), "a block is still open: {sse}");
                assert_eq!(idx, Some(next), "{sse}");
                next += 1;
                let block = &parsed["content_block"];
                let ty = block["type"].as_str().unwrap().to_string();
                if ty == "tool_use" {
                    got.calls.push((
                        block["id"].as_str().unwrap().into(),
                        block["name"].as_str().unwrap().into(),
                        Value::Null,
                    ));
                    args.clear();
                }
                open = Some((idx.unwrap(), ty));
            }
            "content_block_delta" => {
                let (i, ty) = open.clone().expect("delta outside a block");
                assert_eq!(idx, Some(i), "{sse}");
                let delta = &parsed["delta"];
                match (ty.as_str(), delta["type"].as_str().unwrap()) {
                    ("text", "text_delta") => got.text.push_str(delta["text"].as_str().unwrap()),
                    ("thinking", "thinking_delta") => {
                        got.reasoning.push_str(delta["thinking"].as_str().unwrap())
                    }
                    ("tool_use", "input_json_delta") => {
                        args.push_str(delta["partial_json"].as_str().unwrap())
                    }
                    other => panic!("delta {other:?}"),
                }
            }
            "content_block_stop" => {
                let (i, ty) = open.take().expect("stop outside a block");
                assert_eq!(idx, Some(i));
                if ty == "tool_use" {
                    let call = got.calls.last_mut().unwrap();
                    call.2 = if args.is_empty() {
                        json!({})
                    } else {
                        args_value(&args)
                    };
                }
            }
            "message_delta" => {
                assert!(open.is_none());
                got.stop = parsed["delta"]["stop_reason"].as_str().unwrap().to_string();
                got.usage = anthropic_usage(&parsed["usage"]);
            }
            "message_start" | "message_stop" | "ping" => {}
            other => panic!("event {other}"),
        }
    }
    got
}
