//! Test helpers for the stream property: one abstract answer rendered as each upstream format
//! (non-stream body, and stream events split at given points). `collect` puts the client side
//! back together.

use serde_json::{json, Value};

/// An answer in the shape every format can carry: reasoning, text, then tool calls.
#[derive(Debug, Clone)]
pub struct Ans {
    pub thinking: Option<String>,
    pub text: Option<String>,
    pub calls: Vec<(String, Value)>,
    pub max_tokens: bool,
    /// (input incl. cache reads, cache reads, output)
    pub usage: (u64, u64, u64),
}

/// `s` cut into pieces at the char positions `cuts` (taken modulo its length).
pub fn split(s: &str, cuts: &[usize]) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (chars.len() + 1)).collect();
    at.push(0);
    at.push(chars.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2)
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .collect()
}

impl Ans {
    fn stop(&self, tool: &'static str, max: &'static str, end: &'static str) -> &'static str {
        if !self.calls.is_empty() {
            tool
        } else if self.max_tokens {
            max
        } else {
            end
        }
    }

    pub fn anthropic_body(&self) -> String {
        let mut content = Vec::new();
        if let Some(t) = &self.thinking {
            content.push(json!({"type": "thinking", "thinking": t, "signature": "sig"}));
        }
        if let Some(t) = &self.text {
            content.push(json!({"type": "text", "text": t}));
        }
        for (i, (name, args)) in self.calls.iter().enumerate() {
            content.push(json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": args}));
        }
        let (input, cached, out) = self.usage;
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "up", "content": content,
            "stop_reason": self.stop("tool_use", "max_tokens", "end_turn"), "stop_sequence": null,
            "usage": {"input_tokens": input - cached, "cache_read_input_tokens": cached, "output_tokens": out}})
        .to_string()
    }

    pub fn anthropic_stream(&self, cuts: &[usize], pings: bool) -> Vec<String> {
        let (input, cached, out) = self.usage;
        let mut ev = vec![
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "up", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input - cached, "cache_read_input_tokens": cached, "output_tokens": 1}}}),
        ];
        let mut index = 0;
        let mut block = |ev: &mut Vec<Value>, start: Value, ty: &str, key: &str, s: &str| {
            ev.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
            for piece in split(s, cuts) {
                if pings {
                    ev.push(json!({"type": "ping"}));
                }
                ev.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": ty, key: piece}}));
            }
            ev.push(json!({"type": "content_block_stop", "index": index}));
            index += 1;
        };
        if let Some(t) = &self.thinking {
            block(
                &mut ev,
                json!({"type": "thinking", "thinking": ""}),
                "thinking_delta",
                "thinking",
                t,
            );
        }
        if let Some(t) = &self.text {
            block(
                &mut ev,
                json!({"type": "text", "text": ""}),
                "text_delta",
                "text",
                t,
            );
        }
        for (i, (name, args)) in self.calls.iter().enumerate() {
            let start =
                json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}});
            block(
                &mut ev,
                start,
                "input_json_delta",
                "partial_json",
                &args.to_string(),
            );
        }
        ev.push(json!({"type": "message_delta", "delta": {"stop_reason": self.stop("tool_use", "max_tokens", "end_turn"),
            "stop_sequence": null}, "usage": {"output_tokens": out}}));
        ev.push(json!({"type": "message_stop"}));
        ev.iter().map(Value::to_string).collect()
    }

    pub fn openai_body(&self) -> String {
        let calls: Vec<Value> = self.calls.iter().enumerate().map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        }).collect();
        let mut msg = json!({"role": "assistant", "content": self.text});
        if let Some(t) = &self.thinking {
            msg["reasoning_content"] = t.as_str().into();
        }
        if !calls.is_empty() {
            msg["tool_calls"] = calls.into();
        }
        let (input, cached, out) = self.usage;
        json!({"id": "c1", "object": "chat.completion", "created": 5, "model": "up",
            "choices": [{"index": 0, "message": msg, "finish_reason": self.stop("tool_calls", "length", "stop")}],
            "usage": {"prompt_tokens": input, "completion_tokens": out, "prompt_tokens_details": {"cached_tokens": cached}}})
        .to_string()
    }

    pub fn openai_stream(&self, cuts: &[usize]) -> Vec<String> {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "up",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
        };
        let mut ev = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        for p in self.thinking.iter().flat_map(|t| split(t, cuts)) {
            ev.push(chunk(json!({"reasoning_content": p}), Value::Null));
        }
        for p in self.text.iter().flat_map(|t| split(t, cuts)) {
            ev.push(chunk(json!({"content": p}), Value::Null));
        }
        for (i, (name, args)) in self.calls.iter().enumerate() {
            let pieces = split(&args.to_string(), cuts);
            for (j, p) in pieces.into_iter().enumerate() {
                let tc = if j == 0 {
                    json!({"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": p}})
                } else {
                    json!({"index": i, "function": {"arguments": p}})
                };
                ev.push(chunk(json!({"tool_calls": [tc]}), Value::Null));
            }
        }
        ev.push(chunk(
            json!({}),
            self.stop("tool_calls", "length", "stop").into(),
        ));
        let (input, cached, out) = self.usage;
        ev.push(json!({"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "up", "choices": [],
            "usage": {"prompt_tokens": input, "completion_tokens": out, "prompt_tokens_details": {"cached_tokens": cached}}}).to_string());
        ev.push("[DONE]".to_string());
        ev
    }

    fn gemini_usage(&self) -> Value {
        let (input, cached, out) = self.usage;
        json!({"promptTokenCount": input, "cachedContentTokenCount": cached, "candidatesTokenCount": out})
    }

    fn gemini_calls(&self) -> Vec<Value> {
        self.calls
            .iter()
            .map(|(name, args)| json!({"functionCall": {"name": name, "args": args}}))
            .collect()
    }

    pub fn gemini_body(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = &self.thinking {
            parts.push(json!({"text": t, "thought": true}));
        }
        if let Some(t) = &self.text {
            parts.push(json!({"text": t}));
        }
        parts.extend(self.gemini_calls());
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": self.stop("STOP", "MAX_TOKENS", "STOP"), "index": 0}],
            "usageMetadata": self.gemini_usage(), "modelVersion": "up", "responseId": "r1"}).to_string()
    }

    pub fn gemini_stream(&self, cuts: &[usize]) -> Vec<String> {
        let event = |parts: Vec<Value>| {
            json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": "up", "responseId": "r1"})
        };
        let mut ev: Vec<Value> = Vec::new();
        for p in self.thinking.iter().flat_map(|t| split(t, cuts)) {
            ev.push(event(vec![json!({"text": p, "thought": true})]));
        }
        for p in self.text.iter().flat_map(|t| split(t, cuts)) {
            ev.push(event(vec![json!({"text": p})]));
        }
        let mut last = event(self.gemini_calls());
        last["candidates"][0]["finishReason"] = self.stop("STOP", "MAX_TOKENS", "STOP").into();
        last["usageMetadata"] = self.gemini_usage();
        ev.push(last);
        ev.iter().map(Value::to_string).collect()
    }
}
