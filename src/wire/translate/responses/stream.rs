//! `ResponsesStream`: an upstream stream (Chat chunks, Messages events or Gemini responses)
//! as Responses typed events. The upstream's events go through `StreamTranslator` into Chat
//! chunks — that reads every format, its errors, usage and stop reasons — and the chunks are
//! written as typed events by `events::Events`. The `StreamStep`s keep `StreamTranslator`'s
//! meaning: `response.created` / `response.in_progress` are preamble (not content), the
//! first text, reasoning or function call is content (the commit point).

use serde_json::Value;

use super::super::answer::AnswerOptions;
use super::super::upstream_error::UpstreamError;
use super::super::usage::Usage;
use super::super::{StreamStep, StreamTranslator, WireFormat};
use super::events::Events;
use super::output::{seed, End, Head};

/// One upstream stream translated for one Responses client.
pub struct ResponsesStream {
    inner: StreamTranslator,
    events: Events,
    seed: String,
    created: u64,
    head: Option<Head>,
    finish_reason: Option<String>,
    closed: bool,
    buf: Vec<u8>,
}

impl ResponsesStream {
    /// Upstream events dropped because their data was not JSON (`StreamTranslator`).
    pub fn malformed_dropped(&self) -> u64 {
        self.inner.malformed_dropped()
    }

    /// `upstream`: the upstream's format.
    pub fn new(upstream: WireFormat, opts: &AnswerOptions) -> Self {
        let seed = seed(opts.id_seed);
        ResponsesStream {
            inner: StreamTranslator::new(upstream, WireFormat::OpenAi, opts, true),
            events: Events::new(seed.clone()),
            seed,
            created: opts.created,
            head: None,
            finish_reason: None,
            closed: false,
            buf: Vec::new(),
        }
    }

    /// Translate one upstream event (`event` name, `data` text, as the framer split them).
    pub fn feed(&mut self, event: Option<&str>, data: &str, out: &mut Vec<u8>) -> StreamStep {
        if self.closed {
            return StreamStep::default();
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let step = self.inner.feed(event, data, &mut buf);
        let step = self.take(step, &buf, out);
        self.buf = buf;
        step
    }

    /// The upstream body ended (see `StreamTranslator::finish`): `terminal: false` and nothing
    /// written when the answer is incomplete.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> StreamStep {
        if self.closed {
            return StreamStep {
                terminal: true,
                ..StreamStep::default()
            };
        }
        let mut buf = Vec::new();
        let step = self.inner.finish(&mut buf);
        self.take(step, &buf, out)
    }

    /// Usage reported by the upstream so far (`None`: none yet).
    pub fn usage(&self) -> Option<Usage> {
        self.inner.usage()
    }

    /// Whether any content was written (the stream is past its commit point).
    pub fn content_seen(&self) -> bool {
        self.inner.content_seen()
    }

    /// Characters of content written so far (for a usage estimate when none is reported).
    pub fn content_chars(&self) -> u64 {
        self.inner.content_chars()
    }

    /// The Chat chunks `StreamTranslator` wrote for one upstream event, as typed events.
    fn take(&mut self, mut step: StreamStep, chunks: &[u8], out: &mut Vec<u8>) -> StreamStep {
        for data in data_lines(chunks) {
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if v.get("error").is_some() {
                continue;
            }
            if let Err(e) = self.chunk(&v, out) {
                if step.error.is_none() {
                    step.error_before_content = false;
                    step.error = Some(e);
                }
                step.terminal = true;
                break;
            }
        }
        if let Some(e) = &step.error {
            let head = self.head("", out);
            self.events
                .failed(&head, e, self.inner.usage().as_ref(), out);
            step.terminal = true;
        } else if step.terminal {
            let head = self.head("", out);
            let end = End::from_finish(self.finish_reason.as_deref());
            let usage = self.inner.usage().unwrap_or_default();
            self.events.finish(&head, end, &usage, out);
        }
        self.closed = step.terminal;
        step
    }

    /// The `response` facts, opening the stream (its preamble) the first time.
    fn head(&mut self, model: &str, out: &mut Vec<u8>) -> Head {
        if let Some(h) = &self.head {
            return h.clone();
        }
        let head = Head::new(&self.seed, self.created, model);
        self.events.preamble(&head, out);
        self.head = Some(head.clone());
        head
    }

    /// One Chat chunk (choice 0, as `StreamTranslator` writes them).
    fn chunk(&mut self, value: &Value, out: &mut Vec<u8>) -> Result<(), UpstreamError> {
        if self.head.is_none() {
            self.head(value["model"].as_str().unwrap_or_default(), out);
        }
        let Some(ch) = value["choices"].get(0) else {
            return Ok(());
        };
        let delta = &ch["delta"];
        if let Some(t) = delta["reasoning_content"]
            .as_str()
            .filter(|t| !t.is_empty())
        {
            self.events.reasoning(t, out);
        }
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.events.text(t, out);
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let call_index = tc["index"].as_u64().unwrap_or(0) as usize;
            let function = &tc["function"];
            if let Some(id) = tc["id"].as_str() {
                self.events
                    .call_start(id, function["name"].as_str().unwrap_or_default(), out);
            }
            if let Some(a) = function["arguments"].as_str().filter(|a| !a.is_empty()) {
                self.events.call_args(call_index, a, out)?;
            }
        }
        if let Some(f) = ch["finish_reason"].as_str() {
            self.finish_reason = Some(f.to_string());
        }
        Ok(())
    }
}

/// The `data:` payloads of well-formed SSE bytes (`StreamTranslator`'s output), `[DONE]` left
/// out.
fn data_lines(sse: &[u8]) -> impl Iterator<Item = &str> {
    let text = std::str::from_utf8(sse).unwrap_or_default();
    text.split("\n\n")
        .filter_map(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|d| d.trim() != "[DONE]")
}
