//! `force_non_stream` (R9.6): replay one complete JSON answer as a well-formed SSE stream that
//! ends with its terminal event — chat chunks then `data: [DONE]`, Anthropic
//! `message_start` … `message_stop`, or Responses `response.created` … `response.completed`.
//! Unexpected JSON shapes are skipped, never a panic.

use bytes::Bytes;
use serde_json::{json, Value};

use super::Dialect;

fn data(out: &mut String, value: &Value) {
    out.push_str("data: ");
    out.push_str(&value.to_string());
    out.push_str("\n\n");
}

fn event(out: &mut String, name: &str, value: &Value) {
    out.push_str("event: ");
    out.push_str(name);
    out.push('\n');
    data(out, value);
}

/// The SSE bytes for `body`, or `None` when it is not a JSON answer of `dialect`.
pub fn replay(dialect: Dialect, body: &[u8], include_usage: bool) -> Option<Bytes> {
    let answer: Value = serde_json::from_slice(body).ok()?;
    let text = match dialect {
        Dialect::Chat => chat(&answer, include_usage)?,
        Dialect::Messages => messages(&answer)?,
        Dialect::Responses => super::replay_responses::responses(&answer)?,
    };
    Some(Bytes::from(text))
}

fn chat(value: &Value, include_usage: bool) -> Option<String> {
    let choices = value["choices"].as_array()?;
    let chunk = |choices: Value| {
        let mut event = json!({
            "id": value["id"],
            "object": "chat.completion.chunk",
            "created": value["created"],
            "model": value["model"],
            "choices": choices,
        });
        if value["system_fingerprint"].is_string() {
            event["system_fingerprint"] = value["system_fingerprint"].clone();
        }
        event
    };
    let mut out = String::new();
    for (n, c) in choices.iter().enumerate() {
        let index = c["index"].as_u64().unwrap_or(n as u64);
        let message = &c["message"];
        let role = message["role"].as_str().unwrap_or("assistant");
        let first = json!([{"index": index, "delta": {"role": role, "content": ""}, "finish_reason": null}]);
        data(&mut out, &chunk(first));
        if let Some(r) = message["reasoning_content"]
            .as_str()
            .filter(|s| !s.is_empty())
        {
            let piece =
                json!([{"index": index, "delta": {"reasoning_content": r}, "finish_reason": null}]);
            data(&mut out, &chunk(piece));
        }
        if let Some(t) = message["content"].as_str().filter(|s| !s.is_empty()) {
            let piece = json!([{"index": index, "delta": {"content": t}, "finish_reason": null}]);
            data(&mut out, &chunk(piece));
        }
        if let Some(calls) = message["tool_calls"].as_array().filter(|a| !a.is_empty()) {
            let calls: Vec<Value> = calls
                .iter()
                .filter(|t| t.is_object())
                .enumerate()
                .map(|(k, call)| {
                    let mut call = call.clone();
                    call["index"] = json!(k);
                    call
                })
                .collect();
            let piece =
                json!([{"index": index, "delta": {"tool_calls": calls}, "finish_reason": null}]);
            data(&mut out, &chunk(piece));
        }
        let reason = if c["finish_reason"].is_null() {
            json!("stop")
        } else {
            c["finish_reason"].clone()
        };
        let piece = json!([{"index": index, "delta": {}, "finish_reason": reason}]);
        data(&mut out, &chunk(piece));
    }
    if include_usage && value["usage"].is_object() {
        let mut usage_chunk = chunk(json!([]));
        usage_chunk["usage"] = value["usage"].clone();
        data(&mut out, &usage_chunk);
    }
    out.push_str("data: [DONE]\n\n");
    Some(out)
}

fn messages(value: &Value) -> Option<String> {
    let content = value["content"].as_array()?;
    let usage = &value["usage"];
    let mut start_usage = usage.clone();
    if start_usage.is_object() {
        start_usage["output_tokens"] = json!(0);
    }
    let mut out = String::new();
    event(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": value["id"], "type": "message", "role": value["role"].as_str().unwrap_or("assistant"),
            "model": value["model"], "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": start_usage,
        }}),
    );
    for (i, b) in content.iter().filter(|b| b.is_object()).enumerate() {
        let mut start = b.clone();
        let delta = match b["type"].as_str().unwrap_or("") {
            "text" => {
                start["text"] = json!("");
                vec![json!({"type": "text_delta", "text": b["text"]})]
            }
            "thinking" => {
                start["thinking"] = json!("");
                start["signature"] = json!("");
                let mut deltas = vec![json!({"type": "thinking_delta", "thinking": b["thinking"]})];
                if b["signature"].is_string() {
                    deltas.push(json!({"type": "signature_delta", "signature": b["signature"]}));
                }
                deltas
            }
            "tool_use" | "server_tool_use" => {
                start["input"] = json!({});
                let partial = b["input"].to_string();
                vec![json!({"type": "input_json_delta", "partial_json": partial})]
            }
            _ => Vec::new(),
        };
        event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": i, "content_block": start}),
        );
        for d in delta {
            event(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i, "delta": d}),
            );
        }
        event(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
        );
    }
    let stop_reason = if value["stop_reason"].is_null() {
        json!("end_turn")
    } else {
        value["stop_reason"].clone()
    };
    event(
        &mut out,
        "message_delta",
        &json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": value["stop_sequence"]},
            "usage": {"output_tokens": usage["output_tokens"].as_u64().unwrap_or(0)}}),
    );
    event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    Some(out)
}
