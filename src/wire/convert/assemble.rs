//! `force_stream` (R9.6): fold an upstream SSE stream into one complete JSON answer — a chat
//! `chat.completion` (content, tool calls from deltas, finish_reason, usage), an Anthropic
//! `message` (content blocks, stop_reason, usage) or a Responses `response` (the object of
//! its terminal event). Unexpected JSON shapes are skipped, never a panic.

use serde_json::{json, Map, Value};

use super::Dialect;
use crate::wire::sse::Event;

/// Accumulates the events of one stream.
#[derive(Debug)]
pub struct Assembler {
    dialect: Dialect,
    head: Map<String, Value>,
    /// Chat: one entry per choice index.
    choices: Vec<ChatChoice>,
    /// Messages: content blocks by index, with their raw `input_json_delta` text.
    blocks: Vec<(Value, String)>,
    usage: Map<String, Value>,
    stop: Map<String, Value>,
    /// Responses: the `response` object of the latest event that carried one.
    response: Value,
}

#[derive(Debug, Default)]
struct ChatChoice {
    role: Option<Value>,
    content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Vec<Value>,
    finish_reason: Value,
}

fn at<T: Default>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize_with(i + 1, T::default);
    }
    &mut v[i]
}

fn push_str(dst: &mut Option<String>, value: &Value) {
    if let Some(s) = value.as_str() {
        dst.get_or_insert_with(String::new).push_str(s);
    }
}

fn merge(dst: &mut Map<String, Value>, src: &Value) {
    if let Some(o) = src.as_object() {
        for (k, v) in o {
            dst.insert(k.clone(), v.clone());
        }
    }
}

/// Index values are small; anything absurd is ignored rather than allocated.
fn index(value: &Value) -> Option<usize> {
    value.as_u64().filter(|&i| i < 1024).map(|i| i as usize)
}

impl Assembler {
    pub fn new(dialect: Dialect) -> Self {
        Assembler {
            dialect,
            head: Map::new(),
            choices: Vec::new(),
            blocks: Vec::new(),
            usage: Map::new(),
            stop: Map::new(),
            response: Value::Null,
        }
    }

    pub fn event(&mut self, ev: &Event) {
        let Some(v) = ev.json() else { return };
        match self.dialect {
            Dialect::Chat => self.chat(v),
            Dialect::Messages => self.messages(v),
            Dialect::Responses => {
                if v["response"].is_object() {
                    self.response = v["response"].clone();
                }
            }
        }
    }

    fn chat(&mut self, value: &Value) {
        for k in [
            "id",
            "created",
            "model",
            "system_fingerprint",
            "service_tier",
        ] {
            if !value[k].is_null() && !self.head.contains_key(k) {
                self.head.insert(k.into(), value[k].clone());
            }
        }
        if value["usage"].is_object() {
            merge(&mut self.usage, &value["usage"]);
        }
        for c in value["choices"].as_array().into_iter().flatten() {
            let choice_index = index(&c["index"]).unwrap_or(0);
            let ch = at(&mut self.choices, choice_index);
            let delta = &c["delta"];
            if delta["role"].is_string() {
                ch.role = Some(delta["role"].clone());
            }
            push_str(&mut ch.content, &delta["content"]);
            push_str(&mut ch.reasoning, &delta["reasoning_content"]);
            let calls = delta["tool_calls"].as_array().into_iter().flatten();
            for tc in calls.filter(|t| t.is_object()) {
                let ti = index(&tc["index"]).unwrap_or(0);
                let slot = at(&mut ch.tool_calls, ti);
                if slot.is_null() {
                    *slot = json!({"id": "", "type": "function", "function": {"name": "", "arguments": ""}});
                }
                for k in ["id", "type"] {
                    if tc[k].is_string() {
                        slot[k] = tc[k].clone();
                    }
                }
                for k in ["name", "arguments"] {
                    if let Some(s) = tc["function"][k].as_str() {
                        let cur = slot["function"][k].as_str().unwrap_or("").to_string();
                        slot["function"][k] = Value::String(cur + s);
                    }
                }
            }
            if c["finish_reason"].is_string() {
                ch.finish_reason = c["finish_reason"].clone();
            }
        }
    }

    fn messages(&mut self, value: &Value) {
        match value["type"].as_str().unwrap_or("") {
            "message_start" => {
                merge(&mut self.head, &value["message"]);
                merge(&mut self.usage, &value["message"]["usage"]);
            }
            "content_block_start" => {
                if let Some(i) = index(&value["index"]) {
                    if self.blocks.len() <= i {
                        self.blocks
                            .resize_with(i + 1, || (Value::Null, String::new()));
                    }
                    // A block that is not an object cannot be filled in: it is dropped.
                    let block = &value["content_block"];
                    self.blocks[i].0 = if block.is_object() {
                        block.clone()
                    } else {
                        Value::Null
                    };
                }
            }
            "content_block_delta" => {
                let Some(i) = index(&value["index"]) else {
                    return;
                };
                let Some((block, json_buf)) = self.blocks.get_mut(i).filter(|b| b.0.is_object())
                else {
                    return;
                };
                let delta = &value["delta"];
                let append = |block: &mut Value, field: &str, s: &str| {
                    let cur = block[field].as_str().unwrap_or("").to_string();
                    block[field] = Value::String(cur + s);
                };
                match delta["type"].as_str().unwrap_or("") {
                    "text_delta" => append(block, "text", delta["text"].as_str().unwrap_or("")),
                    "thinking_delta" => {
                        append(block, "thinking", delta["thinking"].as_str().unwrap_or(""))
                    }
                    "signature_delta" => append(
                        block,
                        "signature",
                        delta["signature"].as_str().unwrap_or(""),
                    ),
                    "citations_delta" => {
                        if !block["citations"].is_array() {
                            block["citations"] = json!([]);
                        }
                        if let Some(a) = block["citations"].as_array_mut() {
                            a.push(delta["citation"].clone());
                        }
                    }
                    "input_json_delta" => {
                        json_buf.push_str(delta["partial_json"].as_str().unwrap_or(""))
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                merge(&mut self.stop, &value["delta"]);
                merge(&mut self.usage, &value["usage"]);
            }
            _ => {}
        }
    }

    /// The complete JSON answer.
    pub fn finish(self) -> Value {
        match self.dialect {
            Dialect::Chat => self.finish_chat(),
            Dialect::Messages => self.finish_messages(),
            Dialect::Responses => self.response,
        }
    }

    fn finish_chat(self) -> Value {
        let mut out = self.head;
        out.insert("object".into(), json!("chat.completion"));
        let choices: Vec<Value> = self
            .choices
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let mut msg = json!({
                    "role": c.role.unwrap_or_else(|| json!("assistant")),
                    "content": c.content,
                });
                if let Some(r) = c.reasoning {
                    msg["reasoning_content"] = json!(r);
                }
                let calls: Vec<Value> = c.tool_calls.into_iter().filter(|t| !t.is_null()).collect();
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                json!({"index": i, "message": msg, "logprobs": null, "finish_reason": c.finish_reason})
            })
            .collect();
        out.insert("choices".into(), Value::Array(choices));
        if !self.usage.is_empty() {
            out.insert("usage".into(), Value::Object(self.usage));
        }
        Value::Object(out)
    }

    fn finish_messages(self) -> Value {
        let mut out = self.head;
        let content: Vec<Value> = self
            .blocks
            .into_iter()
            .filter(|(b, _)| !b.is_null())
            .map(|(mut b, json_buf)| {
                if !json_buf.is_empty() {
                    b["input"] = serde_json::from_str(&json_buf).unwrap_or(json!({}));
                }
                b
            })
            .collect();
        out.insert("content".into(), Value::Array(content));
        for (k, v) in self.stop {
            out.insert(k, v);
        }
        out.insert("usage".into(), Value::Object(self.usage));
        Value::Object(out)
    }
}
