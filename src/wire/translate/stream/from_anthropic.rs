//! Reading an Anthropic Messages stream: `message_start` (id, model, input and cache usage),
//! content blocks (text, thinking, tool_use with `input_json_delta`), `message_delta` (stop
//! reason, cumulative usage), `message_stop`; `ping` and unknown events are skipped, `error`
//! ends the stream.

use serde_json::Value;

use super::super::ir::Stop;
use super::super::shapes::{ABlock, ADelta, AEvent};
use super::super::stop;
use super::super::upstream_error::UpstreamError;
use super::super::usage::{AnthropicUsage, Usage};
use super::super::WireFormat;
use super::emit::{too_many_calls, Emit, MAX_TOOL_CALLS};

#[derive(Default)]
pub(crate) struct FromAnthropic {
    usage: AnthropicUsage,
    usage_seen: bool,
    /// (block index, tool call number) of each tool_use block.
    tools: Vec<(u64, usize)>,
    stop: Option<Stop>,
    stop_sequence: Option<String>,
    /// Text was written, and another block started since: the next text block begins with
    /// a blank line (as in the non-stream answer).
    text_seen: bool,
    gap: bool,
}

impl FromAnthropic {
    pub fn usage(&self) -> Option<Usage> {
        self.usage_seen.then(|| self.usage.usage())
    }

    pub fn feed(
        &mut self,
        data: &str,
        emit: &mut dyn Emit,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        if data.trim().is_empty() {
            return Ok(());
        }
        let ev: AEvent = serde_json::from_str(data)
            .map_err(|e| UpstreamError::bad_answer(WireFormat::Anthropic, e))?;
        match ev.ty.as_ref() {
            "message_start" => {
                let message = ev.message;
                if let Some(u) = message.as_ref().and_then(|message| message.usage.as_ref()) {
                    self.absorb(u);
                }
                let id = message
                    .as_ref()
                    .and_then(|message| message.id.as_deref())
                    .unwrap_or("");
                let model = message
                    .as_ref()
                    .and_then(|message| message.model.as_deref())
                    .unwrap_or("");
                emit.start(id, model, &self.usage.usage(), out);
            }
            "content_block_start" => {
                if let Some(b) = ev.content_block {
                    self.block_start(ev.index.unwrap_or(0), b, emit, out)?;
                }
            }
            "content_block_delta" => {
                if let Some(d) = ev.delta {
                    self.block_delta(ev.index.unwrap_or(0), d, emit, out);
                }
            }
            "message_delta" => {
                if let Some(d) = ev.delta {
                    if let Some(r) = d.stop_reason {
                        self.stop = Some(stop::from_anthropic(&r));
                    }
                    self.stop_sequence = d.stop_sequence.map(|s| s.into_owned());
                }
                if let Some(u) = ev.usage.as_ref() {
                    self.absorb(u);
                }
            }
            "message_stop" => {
                let stop = self.stop.unwrap_or(Stop::EndTurn);
                let usage = self.usage.usage();
                emit.finish(stop, self.stop_sequence.as_deref(), &usage, out);
            }
            "error" => {
                let error = ev
                    .error
                    .map_or(Value::Null, |e| serde_json::json!({ "error": e }));
                return Err(UpstreamError::from_value(WireFormat::Anthropic, 0, &error));
            }
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
        Ok(())
    }

    fn block_delta(&mut self, index: u64, delta: ADelta, emit: &mut dyn Emit, out: &mut Vec<u8>) {
        match delta.ty.as_deref() {
            Some("text_delta") => {
                let text = delta.text.as_deref().unwrap_or("");
                self.text_seen |= !text.is_empty();
                emit.text(text, out);
            }
            Some("thinking_delta") => emit.thinking(delta.thinking.as_deref().unwrap_or(""), out),
            Some("input_json_delta") => {
                // Deltas go to the latest block; look there first.
                let found = match self.tools.last() {
                    Some(&(i, k)) if i == index => Some(k),
                    _ => self.tools.iter().find(|(i, _)| *i == index).map(|t| t.1),
                };
                if let Some(k) = found {
                    emit.tool_args(k, delta.partial_json.as_deref().unwrap_or(""), out);
                }
            }
            // signature_delta, citations_delta: nothing the client format carries.
            _ => {}
        }
    }

    fn absorb(&mut self, usage: &AnthropicUsage) {
        self.usage.absorb(usage);
        self.usage_seen = true;
    }

    fn block_start(
        &mut self,
        index: u64,
        b: ABlock,
        emit: &mut dyn Emit,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        if b.ty.as_ref() != "text" {
            self.gap = self.text_seen;
        }
        match b.ty.as_ref() {
            "text" => {
                if std::mem::take(&mut self.gap) {
                    emit.text(super::super::request::to_openai::TEXT_JOINER, out);
                }
                let text = b.text.as_deref().unwrap_or("");
                self.text_seen |= !text.is_empty();
                emit.text(text, out);
            }
            "thinking" => emit.thinking(b.thinking.as_deref().unwrap_or(""), out),
            "tool_use" => {
                let call_index = self.tools.len();
                if call_index == MAX_TOOL_CALLS {
                    return Err(too_many_calls(WireFormat::Anthropic));
                }
                self.tools.push((index, call_index));
                let id = b.id.as_deref().unwrap_or("");
                emit.tool_start(call_index, id, b.name.as_deref().unwrap_or(""), out);
                // The reference sends `input: {}` here and the arguments as deltas; an input
                // given whole is passed whole.
                if let Some(input) = b.input.map(|r| r.get()).filter(|s| !is_empty_object(s)) {
                    emit.tool_args(call_index, input, out);
                }
            }
            // redacted_thinking and server-tool blocks: nothing the client format carries.
            _ => {}
        }
        Ok(())
    }
}

fn is_empty_object(s: &str) -> bool {
    let trimmed = s.trim();
    trimmed.starts_with('{')
        && trimmed.ends_with('}')
        && trimmed[1..trimmed.len() - 1].trim().is_empty()
}
