//! Non-stream answers: an upstream's 200 body (Anthropic, OpenAI or Gemini) → the client's
//! format (OpenAI `chat.completion` or Anthropic message), with its usage.

mod read;
mod write;

use crate::wire::translate::ids::IdGen;
use crate::wire::translate::upstream_error::UpstreamError;
use crate::wire::translate::usage::Usage;
use crate::wire::translate::WireFormat;

/// What the caller decides about an answer (shared with `StreamTranslator`).
#[derive(Debug, Clone, Copy)]
pub struct AnswerOptions<'a> {
    /// Unix seconds for OpenAI's `created` (the translator has no clock).
    pub created: u64,
    /// Unique per request (the gateway's request id): made-up tool-call and message ids
    /// derive from it (letters and digits are kept).
    pub id_seed: &'a str,
    /// The model name the client sees; `None` keeps the upstream's.
    pub model: Option<&'a str>,
}

/// A translated answer and the usage it reported (`None`: the upstream reported none).
#[derive(Debug, Clone)]
pub struct TranslatedAnswer {
    pub body: Vec<u8>,
    pub usage: Option<Usage>,
}

/// Translate a 200 answer body of format `from` for a client of format `to`. An error object
/// in a 200 (R9.5), a Gemini block and an answer that cannot be read are `UpstreamError`s.
pub fn translate_answer(
    from: WireFormat,
    to: WireFormat,
    body: &[u8],
    opts: &AnswerOptions,
) -> Result<TranslatedAnswer, UpstreamError> {
    let ids = IdGen::new(to, opts.id_seed);
    let mut answer = match from {
        WireFormat::Anthropic => read::anthropic(body)?,
        WireFormat::OpenAi => read::openai(body)?,
        WireFormat::Gemini => read::gemini(body, &ids)?,
    };
    if let Some(m) = opts.model {
        answer.model = m.to_string();
    }
    let usage = answer.usage;
    let written = match to {
        WireFormat::Anthropic => write::anthropic(answer, &ids, from)?,
        WireFormat::OpenAi | WireFormat::Gemini => write::openai(answer, opts.created, &ids),
    };
    Ok(TranslatedAnswer {
        body: written.to_string().into_bytes(),
        usage,
    })
}
