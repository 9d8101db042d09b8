//! Wire-format translation between OpenAI Chat Completions, Anthropic Messages and Gemini
//! `generateContent` (R16.1): requests, non-stream answers, streams and error bodies. Pure code:
//! bytes and JSON in, bytes out, no I/O, no clock (the caller passes `created` and id seeds).
//!
//! The field mapping, what is refused and what is dropped (and reported) are in `README.md` next
//! to this file.
//!
//! How the gateway calls it, per attempt on a channel whose format differs from the client's:
//!
//! 1. `translate_request(client, upstream, body, &RequestOptions)` → upstream body and the
//!    fields dropped on the way (`TranslatedRequest::dropped`: count them, log each once), or a
//!    `TranslateError`: a 400 naming the field and what to do; `refuses_meaning()` says this
//!    target cannot carry the request's meaning (skip it, another channel may serve).
//! 2. non-2xx: `translate_error(upstream, status, body, client)` → the status and body to relay.
//! 3. JSON answer: `translate_answer(upstream, client, body, &AnswerOptions)` → client body and
//!    usage, or an `UpstreamError` (a hidden error or a Gemini safety block).
//! 4. stream: `StreamTranslator::new(upstream, client, AnswerOptions, include_usage)`, then
//!    `feed(event_name, data, &mut out)` per upstream SSE event and `finish(&mut out)` at the
//!    end of the upstream body; each `StreamStep` says whether the event bore content (commit point),
//!    was terminal, or was an error (before any content: a hidden error, fail over).
#![doc = include_str!("README.md")]

pub mod answer;
mod ids;
pub mod ir;
pub mod refusal;
mod request;
pub mod responses;
mod shapes;
pub mod stop;
pub mod stream;
pub mod upstream_error;
pub mod usage;

#[cfg(test)]
mod tests;

pub use answer::{translate_answer, AnswerOptions, TranslatedAnswer};
pub use refusal::{TranslateError, TranslateErrorKind};
pub use stream::{StreamStep, StreamTranslator};
pub use upstream_error::{translate_error, ErrorKind, TranslatedError, UpstreamError};
pub use usage::Usage;

/// A wire format. Clients speak `OpenAi` or `Anthropic`; upstreams any of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// OpenAI Chat Completions (`/v1/chat/completions`) and compatible servers.
    OpenAi,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Gemini `models/{model}:generateContent` / `:streamGenerateContent?alt=sse`.
    Gemini,
}

impl WireFormat {
    /// The human name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            WireFormat::OpenAi => "OpenAI Chat Completions",
            WireFormat::Anthropic => "Anthropic Messages",
            WireFormat::Gemini => "Gemini generateContent",
        }
    }

    /// The short label of a translation, as the request log shows it (`openai->anthropic`).
    pub fn label(self) -> &'static str {
        match self {
            WireFormat::OpenAi => "openai",
            WireFormat::Anthropic => "anthropic",
            WireFormat::Gemini => "gemini",
        }
    }
}

/// `max_tokens` sent to Anthropic when an OpenAI client sets neither `max_tokens` nor
/// `max_completion_tokens` (Anthropic requires the field). A stop for this reason reaches the
/// client as `finish_reason: "length"`.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// Every name `TranslatedRequest::dropped` can carry (the `field` label of
/// `switchyard_translation_dropped_fields_total`, exported at zero from start-up).
pub const DROPPABLE_FIELDS: &[&str] = &[
    "annotations",
    "cache_control",
    "citations",
    "context_management",
    "image_url.detail",
    "metadata",
    "metadata.user_id",
    "output_config.effort",
    "prediction",
    "prompt_cache_key",
    "reasoning_content",
    "reasoning_effort",
    "response_format.json_schema.description",
    "seed",
    "service_tier",
    "store",
    "stream_options.include_obfuscation",
    "temperature",
    "thinking",
    "tool_result.is_error",
    "top_p",
    "tools[].strict",
    "verbosity",
];

/// Which field carries the output limit to an OpenAI-format upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens`: what OpenAI documents, and what its reasoning models require.
    MaxCompletionTokens,
    /// `max_tokens`: for older OpenAI-compatible servers.
    MaxTokens,
}

/// What the caller decides about an upstream request.
#[derive(Debug, Clone, Copy)]
pub struct RequestOptions<'a> {
    /// The upstream model name (the gateway's model mapping); Gemini carries it in the URL.
    pub model: &'a str,
    /// `max_tokens` for Anthropic when the client gave none.
    pub default_max_tokens: u64,
    pub max_tokens_field: MaxTokensField,
    /// Text-only content goes to an OpenAI-format upstream as one string, blocks joined by a
    /// blank line: OpenAI-compatible servers such as DeepSeek refuse content arrays. `false`
    /// sends text parts as the OpenAI reference allows.
    pub join_text_parts: bool,
    /// How assistant reasoning of earlier turns goes back to an OpenAI-format upstream.
    pub reasoning_history: ReasoningHistory,
}

/// How the thinking of earlier assistant turns is written for an OpenAI-format upstream
/// (config `channels.*.reasoning_history`). Towards Anthropic unsigned thinking is always
/// dropped (a signature cannot be made up); towards Gemini it is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReasoningHistory {
    /// `ReasoningContent` for models known to require their reasoning back, else `Drop`.
    #[default]
    Auto,
    /// Thinking blocks of an assistant turn become its `reasoning_content` (joined by a blank
    /// line), as DeepSeek's thinking mode requires in tool loops.
    ReasoningContent,
    /// Thinking is left out of the history.
    Drop,
}

impl ReasoningHistory {
    /// `Auto` resolved by the upstream model name: a name containing `deepseek`, `reasoner`,
    /// `qwq`, `qwen3`, `kimi` or `glm` (case-insensitive) → `ReasoningContent`, any other →
    /// `Drop`. The other values are returned as they are.
    pub fn resolve(self, upstream_model: &str) -> ReasoningHistory {
        const WANT_REASONING: [&str; 6] = ["deepseek", "reasoner", "qwq", "qwen3", "kimi", "glm"];
        match self {
            ReasoningHistory::Auto => {
                let model = upstream_model.to_ascii_lowercase();
                if WANT_REASONING.iter().any(|k| model.contains(k)) {
                    ReasoningHistory::ReasoningContent
                } else {
                    ReasoningHistory::Drop
                }
            }
            other => other,
        }
    }
}

impl<'a> RequestOptions<'a> {
    pub fn new(model: &'a str) -> Self {
        RequestOptions {
            model,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            join_text_parts: true,
            reasoning_history: ReasoningHistory::Auto,
        }
    }
}

/// An upstream request body and the facts the rest of the attempt needs.
#[derive(Debug, Clone)]
pub struct TranslatedRequest {
    pub body: Vec<u8>,
    /// The client asked for a stream (for Gemini: call `:streamGenerateContent?alt=sse`).
    pub stream: bool,
    /// An OpenAI client asked for `stream_options.include_usage` (pass to `StreamTranslator`).
    pub include_usage: bool,
    /// Fields of the client's request left out because the upstream cannot express them and
    /// their absence does not change the answer (stable names such as `context_management`,
    /// `cache_control`, `metadata`, `thinking`; each once). README.md lists them.
    pub dropped: Vec<&'static str>,
}

/// `s` starts with `prefix`, ASCII case ignored (model names are matched so).
pub fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// OpenAI's reasoning model families (o1, o3, o4, gpt-5 but its `-chat` variants): they refuse
/// `max_tokens` (only `max_completion_tokens`) and any sampling but the default.
pub fn openai_reasoning_model(model: &str) -> bool {
    // Compared without case, and without a lowercased copy (this runs on every request).
    let name = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|p| starts_with_ignore_case(name, p))
        && !name
            .as_bytes()
            .windows(5)
            .any(|w| w.eq_ignore_ascii_case(b"-chat"))
}

/// Translate a client request body (`from`: OpenAI or Anthropic) for an upstream of format `to`.
pub fn translate_request(
    from: WireFormat,
    to: WireFormat,
    body: &[u8],
    opts: &RequestOptions,
) -> Result<TranslatedRequest, TranslateError> {
    let request: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        TranslateError::invalid("", format!("request body is not valid JSON ({e})"))
    })?;
    let mut ir = read_request(from, to, request)?;
    let keeps_thinking = to == WireFormat::OpenAi
        && opts.reasoning_history.resolve(opts.model) == ReasoningHistory::ReasoningContent;
    let has_thinking = ir
        .messages
        .iter()
        .any(|m| m.parts.iter().any(|p| matches!(p, ir::Part::Thinking(_))));
    if has_thinking && !keeps_thinking {
        ir.note_dropped("thinking");
    }
    if to == WireFormat::OpenAi && openai_reasoning_model(opts.model) {
        // OpenAI's reasoning models take only the default sampling (temperature 1): a
        // client's temperature or top_p is a hint they cannot honour, not a refusal.
        if ir.temperature.take().is_some_and(|t| t != 1.0) {
            ir.note_dropped("temperature");
        }
        if ir.top_p.take().is_some_and(|p| p != 1.0) {
            ir.note_dropped("top_p");
        }
    }
    let (stream, include_usage) = (ir.stream, ir.include_usage);
    let dropped = std::mem::take(&mut ir.dropped);
    let out = write_request(ir, to, opts);
    Ok(TranslatedRequest {
        body: out.to_string().into_bytes(),
        stream,
        include_usage,
        dropped,
    })
}

/// Read a client request into the neutral form, refusing what `to` cannot express.
pub(crate) fn read_request(
    from: WireFormat,
    to: WireFormat,
    v: serde_json::Value,
) -> Result<ir::ChatRequest, TranslateError> {
    match (from, to) {
        (WireFormat::OpenAi, WireFormat::Anthropic | WireFormat::Gemini) => {
            request::from_openai::read(v, to)
        }
        (WireFormat::Anthropic, WireFormat::OpenAi | WireFormat::Gemini) => {
            request::from_anthropic::read(v, to)
        }
        _ => Err(TranslateError::unsupported(
            "",
            format!(
                "translation of {} requests to {} is not provided",
                from.name(),
                to.name()
            ),
        )),
    }
}

/// Write the neutral request in format `to`.
pub(crate) fn write_request(
    ir: ir::ChatRequest,
    to: WireFormat,
    opts: &RequestOptions,
) -> serde_json::Value {
    match to {
        WireFormat::OpenAi => request::to_openai::write(ir, opts),
        WireFormat::Anthropic => request::to_anthropic::write(ir, opts),
        WireFormat::Gemini => request::to_gemini::write(ir),
    }
}
