//! Reading an OpenAI Chat Completions stream: chunks with `content`, `reasoning_content` (or
//! `reasoning`), `refusal` and tool-call fragments (keyed by `index`; `id` and `name` in the
//! first), `finish_reason`, the usage chunk, `data: [DONE]`; `data: {"error":…}` ends it. An
//! event whose data is not JSON at all (a proxy's comment, a keepalive word) is dropped and
//! counted; JSON that is not a chunk is an unreadable answer.

use serde_json::json;

use super::super::ir::Stop;
use super::super::shapes::{OCompletion, OToolCall};
use super::super::stop;
use super::super::upstream_error::UpstreamError;
use super::super::usage::Usage;
use super::super::WireFormat;
use super::emit::{too_many_calls, Emit, MAX_TOOL_CALLS};

/// One upstream tool call being streamed.
struct Call {
    index: u64,
    k: usize,
    id: String,
    name: String,
    started: bool,
    /// Arguments that arrived before the name (started once it is known).
    pending: String,
}

#[derive(Default)]
pub(crate) struct FromOpenAi {
    started: bool,
    calls: Vec<Call>,
    finish: Option<Stop>,
    refusal: bool,
    usage: Option<Usage>,
    /// Events dropped because their data was not JSON.
    malformed: u64,
}

impl FromOpenAi {
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Events dropped so far because their data was not JSON.
    pub fn malformed_dropped(&self) -> u64 {
        self.malformed
    }

    /// A `finish_reason` was seen: the answer is complete even if `[DONE]` never comes.
    pub fn finished(&self) -> bool {
        self.finish.is_some()
    }

    pub fn feed(
        &mut self,
        data: &str,
        emit: &mut dyn Emit,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done(emit, out);
            return Ok(());
        }
        let completion: OCompletion = match serde_json::from_str(data) {
            Ok(completion) => completion,
            Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(data).is_err() => {
                self.malformed += 1;
                return Ok(());
            }
            Err(e) => return Err(UpstreamError::bad_answer(WireFormat::OpenAi, e)),
        };
        if let Some(e) = completion.error {
            return Err(UpstreamError::from_value(
                WireFormat::OpenAi,
                0,
                &json!({ "error": e }),
            ));
        }
        if !self.started {
            self.started = true;
            let (id, model) = (
                completion.id.as_deref().unwrap_or(""),
                completion.model.as_deref().unwrap_or(""),
            );
            emit.start(id, model, &Usage::default(), out);
        }
        if let Some(u) = completion.usage {
            self.usage = Some(u.usage());
        }
        // One choice: neither client format this feeds asks for more.
        let Some(ch) = completion
            .choices
            .into_iter()
            .find(|ch| ch.index.unwrap_or(0) == 0)
        else {
            return Ok(());
        };
        if let Some(d) = ch.delta.or(ch.message) {
            if let Some(r) = d.reasoning_content.as_deref().or(d.reasoning.as_deref()) {
                emit.thinking(r, out);
            }
            if let Some(t) = d.content.as_deref() {
                emit.text(t, out);
            }
            if let Some(r) = d.refusal.as_deref().filter(|r| !r.is_empty()) {
                self.refusal = true;
                emit.text(r, out);
            }
            for (pos, tc) in d.tool_calls.into_iter().enumerate() {
                self.tool_fragment(pos, tc, emit, out)?;
            }
        }
        if let Some(f) = ch.finish_reason {
            self.finish = Some(stop::from_openai(&f));
        }
        Ok(())
    }

    fn tool_fragment(
        &mut self,
        pos: usize,
        tc: OToolCall,
        emit: &mut dyn Emit,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let index = tc.index.unwrap_or(pos as u64);
        // Fragments continue the latest call; look there first.
        let at = match self.calls.last() {
            Some(c) if c.index == index => Some(c.k),
            _ => self.calls.iter().position(|c| c.index == index),
        };
        let at = match at {
            Some(at) => at,
            None => {
                let call_index = self.calls.len();
                if call_index == MAX_TOOL_CALLS {
                    return Err(too_many_calls(WireFormat::OpenAi));
                }
                self.calls.push(Call {
                    index,
                    k: call_index,
                    id: String::new(),
                    name: String::new(),
                    started: false,
                    pending: String::new(),
                });
                call_index
            }
        };
        let call = &mut self.calls[at];
        let (name, args) = tc.function.map_or((None, None), |f| (f.name, f.arguments));
        if !call.started {
            if let Some(id) = tc.id.filter(|i| !i.is_empty()) {
                call.id = id.into_owned();
            }
            if let Some(n) = name {
                call.name.push_str(&n);
            }
            if let Some(a) = args.as_deref() {
                call.pending.push_str(a);
            }
            if !call.name.is_empty() {
                start_call(call, emit, out);
            }
        } else if let Some(a) = args.as_deref() {
            emit.tool_args(call.k, a, out);
        }
        Ok(())
    }

    /// `[DONE]` (or the end of the body after a `finish_reason`): close the answer.
    pub fn done(&mut self, emit: &mut dyn Emit, out: &mut Vec<u8>) {
        for call in self.calls.iter_mut().filter(|c| !c.started) {
            start_call(call, emit, out);
        }
        let stop = match self.finish {
            _ if self.refusal => Stop::ContentFilter,
            // Servers that say `stop` after tool calls (vLLM, Ollama) mean `tool_calls`.
            Some(Stop::EndTurn) | None if !self.calls.is_empty() => Stop::ToolUse,
            Some(s) => s,
            None => Stop::EndTurn,
        };
        emit.finish(stop, None, &self.usage.unwrap_or_default(), out);
    }
}

fn start_call(call: &mut Call, emit: &mut dyn Emit, out: &mut Vec<u8>) {
    call.started = true;
    emit.tool_start(call.k, &call.id, &call.name, out);
    if !call.pending.is_empty() {
        let pending = std::mem::take(&mut call.pending);
        emit.tool_args(call.k, &pending, out);
    }
}
