//! Wire-format translation between OpenAI Chat Completions, Anthropic Messages and Gemini
//! `generateContent` (R16.1): requests, non-stream answers, streams and error bodies. Pure code:
//! bytes and JSON in, bytes out, no I/O, no clock (the caller passes `created` and id seeds).
//!
//! The field mapping, what is refused and what is ignored are in `README.md` next to this file.
//!
//! How the gateway calls it, per attempt on a channel whose format differs from the client's:
//!
//! 1. `translate_request(client, upstream, body, &RequestOptions)` → upstream body (or a
//!    `TranslateError`: a 400 naming the field, no attempt is made).
//! 2. non-2xx: `translate_error(upstream, status, body, client)` → the status and body to relay.
//! 3. JSON answer: `translate_answer(upstream, client, body, &AnswerOptions)` → client body and
//!    usage, or an `UpstreamError` (a hidden error or a Gemini safety block).
//! 4. stream: `StreamTranslator::new(upstream, client, AnswerOptions, include_usage)`, then
//!    `feed(event_name, data, &mut out)` per upstream SSE event and `finish(&mut out)` at the
//!    end of the upstream body; each `Step` says whether the event bore content (commit point),
//!    was terminal, or was an error (before any content: a hidden error, fail over).
#![doc = include_str!("README.md")]

pub mod answer;
mod answer_read;
mod answer_write;
mod convo;
mod emit_anthropic;
mod emit_gemini;
mod emit_openai;
pub mod error;
pub mod errors;
mod ids;
pub mod ir;
mod read;
mod req_anthropic;
mod req_anthropic_msgs;
mod req_openai;
mod req_openai_msgs;
pub mod responses;
mod shapes;
pub mod stop;
pub mod stream;
pub mod usage;

#[cfg(test)]
mod tests;

pub use answer::{translate_answer, AnswerOptions, TranslatedAnswer};
pub use error::{TranslateError, TranslateErrorKind};
pub use errors::{translate_error, ErrorKind, TranslatedError, UpstreamError};
pub use stream::{Step, StreamTranslator};
pub use usage::Usage;

/// A wire format. Clients speak `OpenAi` or `Anthropic`; upstreams any of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// OpenAI Chat Completions (`/v1/chat/completions`) and compatible servers.
    OpenAi,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Gemini `models/{model}:generateContent` / `:streamGenerateContent?alt=sse`.
    Gemini,
}

impl Format {
    /// The human name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenAi => "OpenAI Chat Completions",
            Format::Anthropic => "Anthropic Messages",
            Format::Gemini => "Gemini generateContent",
        }
    }

    /// The short label of a translation, as the request log shows it (`openai->anthropic`).
    pub fn label(self) -> &'static str {
        match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
        }
    }
}

/// `max_tokens` sent to Anthropic when an OpenAI client sets neither `max_tokens` nor
/// `max_completion_tokens` (Anthropic requires the field). A stop for this reason reaches the
/// client as `finish_reason: "length"`.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

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
}

impl<'a> RequestOptions<'a> {
    pub fn new(model: &'a str) -> Self {
        RequestOptions {
            model,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            join_text_parts: true,
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
}

/// Translate a client request body (`from`: OpenAI or Anthropic) for an upstream of format `to`.
pub fn translate_request(
    from: Format,
    to: Format,
    body: &[u8],
    opts: &RequestOptions,
) -> Result<TranslatedRequest, TranslateError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        TranslateError::invalid("", format!("request body is not valid JSON ({e})"))
    })?;
    let ir = read_request(from, to, v)?;
    let (stream, include_usage) = (ir.stream, ir.include_usage);
    let out = write_request(ir, to, opts);
    Ok(TranslatedRequest {
        body: out.to_string().into_bytes(),
        stream,
        include_usage,
    })
}

/// Read a client request into the neutral form, refusing what `to` cannot express.
pub(crate) fn read_request(
    from: Format,
    to: Format,
    v: serde_json::Value,
) -> Result<ir::ChatRequest, TranslateError> {
    match (from, to) {
        (Format::OpenAi, Format::Anthropic | Format::Gemini) => req_openai::read(v, to),
        (Format::Anthropic, Format::OpenAi | Format::Gemini) => req_anthropic::read(v, to),
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
    to: Format,
    opts: &RequestOptions,
) -> serde_json::Value {
    match to {
        Format::OpenAi => emit_openai::write(ir, opts),
        Format::Anthropic => emit_anthropic::write(ir, opts),
        Format::Gemini => emit_gemini::write(ir),
    }
}
