//! Test helpers: upstream answers written in each format (whole and as
//! streams cut into given pieces), running a `ResponsesStream`, and reading its events back
//! the way the openai SDK's stream accumulator does, checking the event grammar on the way.

use serde_json::{json, Value};

use super::super::super::{AnswerOptions, StreamStep, WireFormat};
use super::super::ResponsesStream;

pub const OPTS: AnswerOptions<'static> = AnswerOptions {
    created: 1_700_000_000,
    id_seed: "req-42",
    model: None,
};

/// One upstream answer, format-neutral, to write in each format.
#[derive(Debug, Clone)]
pub struct Ans {
    pub reasoning: Option<String>,
    pub text: Option<String>,
    /// (call id, name, arguments as JSON text)
    pub calls: Vec<(String, String, String)>,
    /// `length` instead of the natural stop.
    pub max_tokens: bool,
    /// (input, cached part of it, output)
    pub usage: (u64, u64, u64),
}

impl Ans {
    fn finish(&self) -> &'static str {
        match (self.max_tokens, self.calls.is_empty()) {
            (true, _) => "length",
            (false, false) => "tool_calls",
            (false, true) => "stop",
        }
    }

    fn stop_reason(&self) -> &'static str {
        match (self.max_tokens, self.calls.is_empty()) {
            (true, _) => "max_tokens",
            (false, false) => "tool_use",
            (false, true) => "end_turn",
        }
    }

    /// A `chat.completion` body.
    pub fn chat(&self) -> Value {
        let mut msg = json!({"role": "assistant", "content": self.text});
        if let Some(r) = &self.reasoning {
            msg["reasoning_content"] = r.clone().into();
        }
        if !self.calls.is_empty() {
            msg["tool_calls"] = self
                .calls
                .iter()
                .map(|(id, n, a)| json!({"id": id, "type": "function", "function": {"name": n, "arguments": a}}))
                .collect();
        }
        let (i, c, o) = self.usage;
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "up-model",
            "choices": [{"index": 0, "message": msg, "finish_reason": self.finish()}],
            "usage": {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o,
                      "prompt_tokens_details": {"cached_tokens": c}},
        })
    }

    /// An Anthropic message body.
    pub fn anthropic(&self) -> Value {
        let mut content = Vec::new();
        if let Some(r) = &self.reasoning {
            content.push(json!({"type": "thinking", "thinking": r, "signature": "sig"}));
        }
        if let Some(t) = &self.text {
            content.push(json!({"type": "text", "text": t}));
        }
        for (id, n, a) in &self.calls {
            let input: Value = serde_json::from_str(a).expect("args are JSON");
            content.push(json!({"type": "tool_use", "id": id, "name": n, "input": input}));
        }
        let (i, c, o) = self.usage;
        json!({
            "id": "msg_up", "type": "message", "role": "assistant", "model": "up-model",
            "content": content, "stop_reason": self.stop_reason(), "stop_sequence": null,
            "usage": {"input_tokens": i - c, "cache_read_input_tokens": c,
                      "cache_creation_input_tokens": 0, "output_tokens": o},
        })
    }

    /// Chat chunks, each text cut at `cuts` (byte offsets, clamped to char boundaries).
    pub fn chat_stream(&self, cuts: &[usize]) -> Vec<(Option<String>, String)> {
        let head = |delta: Value, finish: Value| {
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "up-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string()
        };
        let mut ev = vec![head(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        for p in self.reasoning.iter().flat_map(|r| pieces(r, cuts)) {
            ev.push(head(json!({"reasoning_content": p}), Value::Null));
        }
        for p in self.text.iter().flat_map(|t| pieces(t, cuts)) {
            ev.push(head(json!({"content": p}), Value::Null));
        }
        for (k, (id, n, a)) in self.calls.iter().enumerate() {
            let start = json!({"tool_calls": [{"index": k, "id": id, "type": "function",
                               "function": {"name": n, "arguments": ""}}]});
            ev.push(head(start, Value::Null));
            for p in pieces(a, cuts) {
                ev.push(head(
                    json!({"tool_calls": [{"index": k, "function": {"arguments": p}}]}),
                    Value::Null,
                ));
            }
        }
        ev.push(head(json!({}), self.finish().into()));
        let (i, c, o) = self.usage;
        ev.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
                   "choices": [], "usage": {"prompt_tokens": i, "completion_tokens": o,
                   "total_tokens": i + o, "prompt_tokens_details": {"cached_tokens": c}}})
            .to_string(),
        );
        ev.push("[DONE]".into());
        ev.into_iter().map(|d| (None, d)).collect()
    }

    /// Anthropic stream events, each text cut at `cuts`.
    pub fn anthropic_stream(&self, cuts: &[usize]) -> Vec<(Option<String>, String)> {
        let (i, c, o) = self.usage;
        let mut ev = vec![
            json!({"type": "message_start", "message": {"id": "msg_up", "type": "message",
            "role": "assistant", "model": "up-model", "content": [], "stop_reason": null,
            "usage": {"input_tokens": i - c, "cache_read_input_tokens": c, "output_tokens": 1}}}),
        ];
        ev.push(json!({"type": "ping"}));
        let mut idx = 0;
        let mut block = |ev: &mut Vec<Value>, start: Value, deltas: Vec<Value>| {
            ev.push(json!({"type": "content_block_start", "index": idx, "content_block": start}));
            for d in deltas {
                ev.push(json!({"type": "content_block_delta", "index": idx, "delta": d}));
            }
            ev.push(json!({"type": "content_block_stop", "index": idx}));
            idx += 1;
        };
        if let Some(r) = &self.reasoning {
            let mut events: Vec<Value> = pieces(r, cuts)
                .into_iter()
                .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                .collect();
            events.push(json!({"type": "signature_delta", "signature": "sig"}));
            block(
                &mut ev,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                events,
            );
        }
        if let Some(t) = &self.text {
            let events = pieces(t, cuts)
                .into_iter()
                .map(|p| json!({"type": "text_delta", "text": p}))
                .collect();
            block(&mut ev, json!({"type": "text", "text": ""}), events);
        }
        for (id, n, a) in &self.calls {
            let events = pieces(a, cuts)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect();
            block(
                &mut ev,
                json!({"type": "tool_use", "id": id, "name": n, "input": {}}),
                events,
            );
        }
        ev.push(
            json!({"type": "message_delta", "delta": {"stop_reason": self.stop_reason(),
            "stop_sequence": null}, "usage": {"output_tokens": o}}),
        );
        ev.push(json!({"type": "message_stop"}));
        ev.into_iter()
            .map(|v| (v["type"].as_str().map(str::to_string), v.to_string()))
            .collect()
    }
}

/// `s` cut at the byte offsets `cuts` (moved back to char boundaries), empty pieces left out.
pub fn pieces(s: &str, cuts: &[usize]) -> Vec<String> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|&c| {
            let mut c = c.min(s.len());
            while !s.is_char_boundary(c) {
                c -= 1;
            }
            c
        })
        .collect();
    at.push(0);
    at.push(s.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| s[w[0]..w[1]].to_string()).collect()
}

/// Run a stream through `ResponsesStream`; the output and every step.
pub fn run(upstream: WireFormat, events: &[(Option<String>, String)]) -> (String, Vec<StreamStep>) {
    let mut stream = ResponsesStream::new(upstream, &OPTS);
    let mut out = Vec::new();
    let mut steps = Vec::new();
    for (name, data) in events {
        steps.push(stream.feed(name.as_deref(), data, &mut out));
    }
    steps.push(stream.finish(&mut out));
    (String::from_utf8(out).expect("UTF-8 output"), steps)
}

/// The events of a Responses stream: (event name, data), checking that each event's
/// `event:` line names its `type` and that sequence numbers count from 0.
pub fn events(sse: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (n, frame) in sse.split("\n\n").filter(|f| !f.is_empty()).enumerate() {
        let mut lines = frame.lines();
        let name = lines
            .next()
            .and_then(|l| l.strip_prefix("event: "))
            .unwrap_or_else(|| panic!("no event line in {frame:?}"));
        let data = lines
            .next()
            .and_then(|l| l.strip_prefix("data: "))
            .unwrap_or_else(|| panic!("no data line in {frame:?}"));
        assert!(lines.next().is_none(), "one data line: {frame:?}");
        let parsed: Value = serde_json::from_str(data).expect("event data is JSON");
        assert_eq!(parsed["type"], name, "{frame}");
        assert_eq!(parsed["sequence_number"], n as u64, "{frame}");
        out.push((name.to_string(), parsed));
    }
    out
}

/// Replay the events as the openai SDK's `ResponseStreamState` accumulates them, checking the
/// grammar (preamble first, one terminal event last, every delta inside its open item), and
/// return the accumulated `output` and the terminal event's `response`.
/// A part added to an item's `content` or `summary` list.
fn add_part(item: &mut Value, list: &str, v: &Value) {
    item[list]
        .as_array_mut()
        .expect("the item's part list")
        .push(v["part"].clone());
}

/// A text or reasoning-summary delta appended to its part.
fn append_text(item: &mut Value, name: &str, v: &Value) {
    let (list, at) = if name == "response.output_text.delta" {
        ("content", v["content_index"].as_u64())
    } else {
        ("summary", v["summary_index"].as_u64())
    };
    let part = &mut item[list][at.expect("part index") as usize];
    let t = format!(
        "{}{}",
        part["text"].as_str().expect("text"),
        v["delta"].as_str().expect("delta")
    );
    part["text"] = t.into();
}

/// `response.output_item.done`: the item accumulated from the deltas is the item done.
fn close_item(item: &mut Value, v: &Value) {
    let mut acc = item.clone();
    if let Some(s) = v["item"].get("status") {
        acc["status"] = s.clone();
    }
    assert_eq!(acc, v["item"], "the accumulated item is the item done");
    *item = v["item"].clone();
}

pub fn accumulate(evs: &[(String, Value)]) -> (Vec<Value>, Value) {
    assert!(evs.len() >= 3, "{evs:?}");
    assert_eq!(evs[0].0, "response.created");
    assert_eq!(evs[1].0, "response.in_progress");
    let mut output: Vec<Value> = Vec::new();
    let mut open: Option<usize> = None;
    let last = evs.len() - 1;
    for (i, (name, v)) in evs.iter().enumerate() {
        let oi = v["output_index"].as_u64().map(|x| x as usize);
        let item_id = |o: &Vec<Value>| o[oi.expect("output_index")]["id"].clone();
        match name.as_str() {
            "response.created" | "response.in_progress" => assert!(i < 2, "{name} at {i}"),
            "response.output_item.added" => {
                assert_eq!(open, None, "an item opened while another is open");
                assert_eq!(oi, Some(output.len()));
                output.push(v["item"].clone());
                open = oi;
            }
            "response.content_part.added" => {
                assert_eq!(oi, open);
                assert_eq!(v["item_id"], item_id(&output));
                add_part(&mut output[oi.expect("index")], "content", v);
            }
            "response.reasoning_summary_part.added" => {
                assert_eq!(oi, open);
                add_part(&mut output[oi.expect("index")], "summary", v);
            }
            "response.output_text.delta" | "response.reasoning_summary_text.delta" => {
                assert_eq!(oi, open, "{name} outside its item");
                assert_eq!(v["item_id"], item_id(&output));
                append_text(&mut output[oi.expect("index")], name, v);
            }
            "response.function_call_arguments.delta" => {
                assert_eq!(oi, open);
                assert_eq!(v["item_id"], item_id(&output));
                let output_index = oi.expect("index");
                let a = format!(
                    "{}{}",
                    output[output_index]["arguments"].as_str().expect("args"),
                    v["delta"].as_str().expect("delta")
                );
                output[output_index]["arguments"] = a.into();
            }
            "response.output_text.done"
            | "response.content_part.done"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_summary_part.done"
            | "response.function_call_arguments.done" => {
                assert_eq!(oi, open, "{name}");
                assert_eq!(v["item_id"], item_id(&output));
            }
            "response.output_item.done" => {
                assert_eq!(oi, open);
                close_item(&mut output[oi.expect("index")], v);
                open = None;
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                assert_eq!(i, last, "{name} is the last event");
            }
            other => panic!("unexpected event {other}"),
        }
    }
    let (name, v) = &evs[last];
    assert!(
        matches!(
            name.as_str(),
            "response.completed" | "response.incomplete" | "response.failed"
        ),
        "last event {name}"
    );
    (output, v["response"].clone())
}
