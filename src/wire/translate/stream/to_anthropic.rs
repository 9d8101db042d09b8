//! Writing Anthropic Messages stream events: `message_start`, one content block at a time
//! (`content_block_start` / `_delta` / `_stop`; a switch between text, thinking and tool calls
//! closes the open block and opens the next), `message_delta` with the stop reason and usage,
//! `message_stop`; errors as `event: error`.

use serde_json::json;

use super::super::ids::IdGen;
use super::super::ir::Stop;
use super::super::stop;
use super::super::upstream_error::UpstreamError;
use super::super::usage::Usage;
use super::super::WireFormat;
use super::emit::{json_str, sse, Counters, Emit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    Tool(usize),
}

pub(crate) struct AnthropicEmit {
    model_override: Option<String>,
    ids: IdGen,
    started: bool,
    open: Option<(Open, usize)>,
    next_index: usize,
    /// Block index of tool call `k`.
    tool_blocks: Vec<usize>,
    counters: Counters,
}

impl AnthropicEmit {
    pub fn new(model: Option<&str>, ids: IdGen) -> Self {
        AnthropicEmit {
            model_override: model.map(str::to_string),
            ids,
            started: false,
            open: None,
            next_index: 0,
            tool_blocks: Vec::new(),
            counters: Counters::default(),
        }
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.start("", "", &Usage::default(), out);
        }
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some((_, index)) = self.open.take() {
            let event = json!({"type": "content_block_stop", "index": index});
            sse(
                out,
                Some("content_block_stop"),
                event.to_string().as_bytes(),
            );
        }
    }

    /// Make `kind` the open block (closing another), returning its index.
    fn open(&mut self, kind: Open, block: serde_json::Value, out: &mut Vec<u8>) -> usize {
        if let Some((k, index)) = self.open {
            if k == kind {
                return index;
            }
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, index));
        let event = json!({"type": "content_block_start", "index": index, "content_block": block});
        sse(
            out,
            Some("content_block_start"),
            event.to_string().as_bytes(),
        );
        index
    }

    /// `content_block_delta` with a delta of `ty` whose one field `key` is `value`.
    fn delta(&mut self, index: usize, ty: &str, key: &str, value: &str, out: &mut Vec<u8>) {
        let mut data = Vec::with_capacity(value.len() + 96);
        data.extend_from_slice(br#"{"type":"content_block_delta","index":"#);
        data.extend_from_slice(index.to_string().as_bytes());
        data.extend_from_slice(br#","delta":{"type":"#);
        json_str(&mut data, ty);
        data.push(b',');
        json_str(&mut data, key);
        data.push(b':');
        json_str(&mut data, value);
        data.extend_from_slice(b"}}");
        sse(out, Some("content_block_delta"), &data);
    }
}

impl Emit for AnthropicEmit {
    fn start(&mut self, id: &str, model: &str, usage: &Usage, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let model = self.model_override.as_deref().unwrap_or(model);
        let event = json!({"type": "message_start", "message": {
            "id": self.ids.message_id(id),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage.to_anthropic(),
        }});
        sse(out, Some("message_start"), event.to_string().as_bytes());
    }

    fn text(&mut self, t: &str, out: &mut Vec<u8>) {
        if t.is_empty() {
            return;
        }
        self.ensure_started(out);
        let index = self.open(Open::Text, json!({"type": "text", "text": ""}), out);
        self.counters.content += 1;
        self.counters.chars += t.chars().count() as u64;
        self.delta(index, "text_delta", "text", t, out);
    }

    fn thinking(&mut self, t: &str, out: &mut Vec<u8>) {
        if t.is_empty() {
            return;
        }
        self.ensure_started(out);
        let block = json!({"type": "thinking", "thinking": "", "signature": ""});
        let index = self.open(Open::Thinking, block, out);
        self.counters.content += 1;
        self.counters.chars += t.chars().count() as u64;
        self.delta(index, "thinking_delta", "thinking", t, out);
    }

    fn tool_start(&mut self, k: usize, id: &str, name: &str, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.close(out);
        let id = self.ids.client_id(id, k);
        let block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
        let index = self.open(Open::Tool(k), block, out);
        if self.tool_blocks.len() <= k {
            self.tool_blocks.resize(k + 1, usize::MAX);
        }
        self.tool_blocks[k] = index;
        self.counters.content += 1;
    }

    fn tool_args(&mut self, k: usize, fragment: &str, out: &mut Vec<u8>) {
        let Some(&i) = self.tool_blocks.get(k).filter(|&&i| i != usize::MAX) else {
            return;
        };
        if fragment.is_empty() {
            return;
        }
        self.counters.chars += fragment.chars().count() as u64;
        // A fragment for an earlier call (an upstream interleaving calls) still names its
        // own block index.
        self.delta(i, "input_json_delta", "partial_json", fragment, out);
    }

    fn finish(&mut self, stop: Stop, seq: Option<&str>, usage: &Usage, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.close(out);
        let seq = seq.filter(|_| stop == Stop::StopSequence);
        let event = json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop::to_anthropic(stop), "stop_sequence": seq},
            "usage": usage.to_anthropic(),
        });
        sse(out, Some("message_delta"), event.to_string().as_bytes());
        sse(out, Some("message_stop"), br#"{"type":"message_stop"}"#);
        self.counters.closed = true;
    }

    fn error(&mut self, e: &UpstreamError, out: &mut Vec<u8>) {
        e.sse_event(WireFormat::Anthropic, out);
        self.counters.closed = true;
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}
