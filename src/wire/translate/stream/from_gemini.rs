//! Reading a Gemini `streamGenerateContent?alt=sse` stream: every event is a whole
//! `GenerateContentResponse` holding the next piece — text (`thought: true` is reasoning),
//! whole function calls (ids made up, thought signatures carried), and on the last one
//! `finishReason` with `usageMetadata`. A prompt block or a safety finish is an error.

use super::super::ids::IdGen;
use super::super::shapes::{GCandidate, GResponse};
use super::super::stop;
use super::super::upstream_error::UpstreamError;
use super::super::usage::Usage;
use super::super::WireFormat;
use super::emit::{too_many_calls, Emit, MAX_TOOL_CALLS};

pub(crate) struct FromGemini {
    ids: IdGen,
    started: bool,
    calls: usize,
    usage: Option<Usage>,
}

impl FromGemini {
    pub fn new(ids: IdGen) -> Self {
        FromGemini {
            ids,
            started: false,
            calls: 0,
            usage: None,
        }
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    pub fn feed(
        &mut self,
        data: &str,
        emit: &mut dyn Emit,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        // Gemini ends lines with CRLF; a framer that keeps the CR leaves it here.
        let data = data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let response: GResponse = match serde_json::from_str(data) {
            Ok(response) => response,
            Err(e) => return Err(unreadable(data, e)),
        };
        if response.error.is_some() && response.candidates.is_empty() {
            return Err(unreadable(data, "an error object"));
        }
        if let Some(reason) = response
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_deref())
        {
            return Err(stop::gemini_block(reason));
        }
        if let Some(u) = response.usage_metadata {
            self.usage = Some(u.usage());
        }
        if !self.started {
            self.started = true;
            let id = response.response_id.as_deref().unwrap_or("");
            let model = response.model_version.as_deref().unwrap_or("");
            emit.start(id, model, &self.usage.unwrap_or_default(), out);
        }
        let Some(cand) = response
            .candidates
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0)
        else {
            return Ok(());
        };
        self.candidate(cand, emit, out)
    }

    fn candidate(
        &mut self,
        cand: GCandidate,
        emit: &mut dyn Emit,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        for p in cand.content.map(|c| c.parts).unwrap_or_default() {
            if let Some(kind) = p.foreign_kind() {
                return Err(UpstreamError::bad_answer(
                    WireFormat::Gemini,
                    format!("a `{kind}` part has no counterpart in a chat stream"),
                ));
            }
            if let Some(f) = p.function_call {
                let call_index = self.calls;
                if call_index == MAX_TOOL_CALLS {
                    return Err(too_many_calls(WireFormat::Gemini));
                }
                self.calls += 1;
                let sig = p.thought_signature.as_deref().unwrap_or("");
                let id = self
                    .ids
                    .call_id(f.id.as_deref().unwrap_or(""), sig, call_index);
                emit.tool_start(call_index, &id, f.name.as_deref().unwrap_or(""), out);
                emit.tool_args(call_index, f.args.map_or("{}", |a| a.get()), out);
            } else if let Some(t) = p.text.as_deref() {
                match p.thought {
                    Some(true) => emit.thinking(t, out),
                    _ => emit.text(t, out),
                }
            }
        }
        let reason = cand
            .finish_reason
            .as_deref()
            .filter(|r| *r != "FINISH_REASON_UNSPECIFIED");
        if let Some(reason) = reason {
            let stop = stop::from_gemini(reason, self.calls > 0)?;
            emit.finish(stop, None, &self.usage.unwrap_or_default(), out);
        }
        Ok(())
    }
}

/// An event that is not a `GenerateContentResponse`: the error it carries (Gemini may wrap it
/// in an array), else a bad answer.
fn unreadable(data: &str, detail: impl std::fmt::Display) -> UpstreamError {
    let parsed: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
    let first = parsed.as_array().and_then(|a| a.first()).unwrap_or(&parsed);
    if first.get("error").is_some() {
        UpstreamError::from_value(WireFormat::Gemini, 0, first)
    } else {
        UpstreamError::bad_answer(WireFormat::Gemini, detail)
    }
}
