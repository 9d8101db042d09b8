//! `StreamTranslator`: a pure, stateful transducer from one upstream SSE stream to the client's.
//! Feed it each upstream event (event name and data text, as the framer split them) and it
//! appends the client-format SSE bytes to emit — none, one or several events — and says what
//! the gateway needs: content-bearing (the commit point), terminal, an error (and whether it
//! came before any content: a hidden error at the start), usage seen.

mod emit;
mod from_anthropic;
mod from_gemini;
mod from_openai;
mod to_anthropic;
mod to_openai;

use super::answer::AnswerOptions;
use super::ids::IdGen;
use super::upstream_error::UpstreamError;
use super::usage::Usage;
use super::WireFormat;
use emit::Emit;

/// What one `feed` (or `finish`) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamStep {
    /// Client-visible content was written (text, reasoning, a tool call): the stream may
    /// commit. Role chunks, `message_start`, pings and usage are not content.
    pub content: bool,
    /// The client's stream is complete (its terminal event was written). After an error this
    /// is true as well: nothing more will be written.
    pub terminal: bool,
    /// The upstream reported an error (or sent something unreadable); its client-format error
    /// event was written.
    pub error: Option<UpstreamError>,
    /// `error` came before any content: a hidden error at the start (R9.5) — fail over, and
    /// throw away what this translator wrote.
    pub error_before_content: bool,
}

enum Source {
    Anthropic(from_anthropic::FromAnthropic),
    OpenAi(from_openai::FromOpenAi),
    Gemini(from_gemini::FromGemini),
}

/// One upstream stream translated for one client. Events after the terminal one are ignored.
pub struct StreamTranslator {
    source: Source,
    emit: Box<dyn Emit + Send>,
    content_seen: bool,
    closed: bool,
}

impl StreamTranslator {
    /// `from`: the upstream's format; `to`: the client's (OpenAI or Anthropic; Gemini clients
    /// do not exist and get OpenAI chunks). `include_usage`: an OpenAI client asked for the
    /// usage chunk (`TranslatedRequest::include_usage`).
    pub fn new(
        from: WireFormat,
        to: WireFormat,
        opts: &AnswerOptions,
        include_usage: bool,
    ) -> Self {
        let ids = IdGen::new(to, opts.id_seed);
        let source = match from {
            WireFormat::Anthropic => Source::Anthropic(Default::default()),
            WireFormat::OpenAi => Source::OpenAi(Default::default()),
            WireFormat::Gemini => Source::Gemini(from_gemini::FromGemini::new(ids.clone())),
        };
        let emit: Box<dyn Emit + Send> = match to {
            WireFormat::Anthropic => Box::new(to_anthropic::AnthropicEmit::new(opts.model, ids)),
            WireFormat::OpenAi | WireFormat::Gemini => Box::new(to_openai::OpenAiEmit::new(
                opts.created,
                opts.model,
                include_usage,
                ids,
            )),
        };
        StreamTranslator {
            source,
            emit,
            content_seen: false,
            closed: false,
        }
    }

    /// Translate one upstream event. `event` is its `event:` name (unused: every format names
    /// the event inside its data), `data` its `data:` lines joined with `\n`.
    pub fn feed(&mut self, event: Option<&str>, data: &str, out: &mut Vec<u8>) -> StreamStep {
        let _ = event;
        if self.closed {
            return StreamStep::default();
        }
        let before = self.emit.counters();
        let emit = self.emit.as_mut();
        let fed = match &mut self.source {
            Source::Anthropic(s) => s.feed(data, emit, out),
            Source::OpenAi(s) => s.feed(data, emit, out),
            Source::Gemini(s) => s.feed(data, emit, out),
        };
        self.step(before, fed, out)
    }

    /// The upstream body ended. An OpenAI stream that gave its `finish_reason` but no
    /// `[DONE]` is completed here; any other stream without its terminal event is incomplete
    /// (`terminal: false`, nothing written: the gateway writes its `stream_incomplete` event).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> StreamStep {
        if self.closed {
            return StreamStep {
                terminal: true,
                ..StreamStep::default()
            };
        }
        let before = self.emit.counters();
        if let Source::OpenAi(s) = &mut self.source {
            if s.finished() {
                s.done(self.emit.as_mut(), out);
            }
        }
        self.step(before, Ok(()), out)
    }

    fn step(
        &mut self,
        before: emit::Counters,
        r: Result<(), UpstreamError>,
        out: &mut Vec<u8>,
    ) -> StreamStep {
        let mut step = StreamStep::default();
        if let Err(e) = r {
            step.error_before_content =
                !self.content_seen && self.emit.counters().content == before.content;
            self.emit.error(&e, out);
            step.error = Some(e);
        }
        let now = self.emit.counters();
        step.content = now.content > before.content;
        self.content_seen |= step.content;
        step.terminal = now.closed;
        self.closed = now.closed;
        step
    }

    /// Usage reported by the upstream so far (`None`: none yet).
    pub fn usage(&self) -> Option<Usage> {
        match &self.source {
            Source::Anthropic(s) => s.usage(),
            Source::OpenAi(s) => s.usage(),
            Source::Gemini(s) => s.usage(),
        }
    }

    /// Whether any content was written (the stream is past its commit point).
    pub fn content_seen(&self) -> bool {
        self.content_seen
    }

    /// Events of an OpenAI-format upstream dropped because their data was not JSON (other
    /// than `[DONE]`): the stream went on without them. Always 0 for the other formats.
    pub fn malformed_dropped(&self) -> u64 {
        match &self.source {
            Source::OpenAi(s) => s.malformed_dropped(),
            Source::Anthropic(_) | Source::Gemini(_) => 0,
        }
    }

    /// Characters of content written so far (for a usage estimate when none is reported).
    pub fn content_chars(&self) -> u64 {
        self.emit.counters().chars
    }
}
