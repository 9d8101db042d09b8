//! Token usage extraction from upstream bodies and stream events (R8.5, R11), normalised
//! across wire formats:
//!
//! | normalised | OpenAI chat / completions | OpenAI Responses | Anthropic Messages |
//! |---|---|---|---|
//! | `prompt_tokens` (all input) | `prompt_tokens` | `input_tokens` | `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` |
//! | `cached_tokens` (cache reads, part of prompt) | `prompt_tokens_details.cached_tokens` | `input_tokens_details.cached_tokens` | `cache_read_input_tokens` |
//! | `cache_write_tokens` (part of prompt) | 0 | 0 | `cache_creation_input_tokens` |
//! | `completion_tokens` | `completion_tokens` | `output_tokens` | `output_tokens` |
//!
//! OpenAI's prompt count already includes its cached tokens; Anthropic's `input_tokens`
//! excludes both cache counts, so they are added. `cached_tokens <= prompt_tokens` always.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde::Deserialize;
use serde_json::Value;

use super::lenient::{Lenient, Object};

pub use super::usage_stream::{estimate_tokens, StreamUsage, CHARS_PER_TOKEN};

/// The usage key, searched for before a body is parsed (built once: a finder costs more to
/// build than to run over a short body). Forwards: the forward search is vectorised, the
/// reverse one is not, and from a short answer's start to its usage near the end the
/// forward search was ~570 instructions cheaper (callgrind); over a long answer either is
/// a small part of the parse that follows.
static USAGE_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"usage\""));

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Every input token, cache reads and writes included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Input tokens read from the provider's prompt cache (part of `prompt_tokens`).
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache (part of `prompt_tokens`).
    pub cache_write_tokens: u64,
    /// Reasoning tokens (part of `completion_tokens`). Carried by translation, which writes
    /// them into the client's format; billing counts them as completion tokens already.
    #[serde(skip)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// The sum of two attempts' usage (a resumed stream bills both, R18.2).
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cached_tokens: self.cached_tokens + other.cached_tokens,
            cache_write_tokens: self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens: self.reasoning_tokens + other.reasoning_tokens,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.prompt_tokens == 0 && self.completion_tokens == 0
    }

    /// Fold a parsed `usage` object (OpenAI chat/completions/responses or Anthropic) into
    /// `self`. Later reports replace earlier ones field by field (Anthropic sends input at
    /// `message_start` and output at `message_delta`).
    pub fn absorb(&mut self, value: &Value) {
        if let Ok(Object(Some(r))) = Object::<Report>::deserialize(value) {
            self.fold(r.raw());
        }
    }

    /// Usage from a complete non-stream body: `usage`, or `response.usage` (Responses API);
    /// `None` when there is none or the body is not a JSON object. Every other field is
    /// skipped without being built.
    pub fn from_body(body: &[u8]) -> Option<Usage> {
        // None without the key at all.
        USAGE_KEY.find(body)?;
        // Read as text when the body is UTF-8 (a JSON body always is): one check of the
        // whole body instead of one per key the parse matches (~1,000 instructions less
        // for a short answer). A body that is not reads as bytes, as before.
        let parsed: Body = match std::str::from_utf8(body) {
            Ok(text) => serde_json::from_str(text).ok()?,
            Err(_) => serde_json::from_slice(body).ok()?,
        };
        let reported = parsed
            .usage
            .0
            .or_else(|| parsed.response.0.and_then(|reported| reported.usage.0))?;
        let mut out = Usage::default();
        out.fold(reported.raw());
        Some(out)
    }

    /// Fold the usage reports of one stream event's data into `self` as the tree reading
    /// does (`StreamUsage::observe`): its `usage`, then `response.usage`, then
    /// `message.usage`, read typed (nothing else is built). `Some(final)`: whether the
    /// `usage` or `response.usage` report carried output tokens. `None`, with `self`
    /// unchanged, when the data is not one JSON object that repeats none of those keys:
    /// the caller reads the tree.
    pub fn absorb_event(&mut self, data: &str) -> Option<bool> {
        let Object(Some(event)) = serde_json::from_str::<Object<EventBody>>(data).ok()? else {
            return None;
        };
        let mut final_seen = false;
        let top = event.usage.0.into_iter();
        for report in top.chain(event.response.0.and_then(|r| r.usage.0)) {
            final_seen |= report.completion_tokens.0.is_some() || report.output_tokens.0.is_some();
            self.fold(report.raw());
        }
        if let Some(report) = event.message.0.and_then(|m| m.usage.0) {
            self.fold(report.raw());
        }
        Some(final_seen)
    }

    /// Fold one report's raw fields in, normalising (see the module table).
    fn fold(&mut self, raw: Raw) {
        if let Some(c) = raw.completion {
            self.completion_tokens = c;
        }
        if let Some(p) = raw.prompt {
            self.prompt_tokens = p;
            self.cached_tokens = raw.cached.unwrap_or(0).min(p);
            self.cache_write_tokens = 0;
        } else if let Some(i) = raw.input {
            if raw.cache_read.is_some() || raw.cache_write.is_some() {
                // Anthropic: input excludes both cache counts.
                let read = raw.cache_read.unwrap_or(0);
                let write = raw.cache_write.unwrap_or(0);
                self.prompt_tokens = i.saturating_add(read).saturating_add(write);
                self.cached_tokens = read;
                self.cache_write_tokens = write;
            } else {
                self.prompt_tokens = i;
                self.cached_tokens = raw.cached.unwrap_or(0).min(i);
                self.cache_write_tokens = 0;
            }
        }
    }
}

/// The usage fields of one report, as sent.
#[derive(Debug, Clone, Copy, Default)]
struct Raw {
    prompt: Option<u64>,
    input: Option<u64>,
    completion: Option<u64>,
    /// OpenAI `*_tokens_details.cached_tokens` (included in the prompt count).
    cached: Option<u64>,
    /// Anthropic `cache_read_input_tokens` (excluded from `input_tokens`).
    cache_read: Option<u64>,
    /// Anthropic `cache_creation_input_tokens` (excluded from `input_tokens`).
    cache_write: Option<u64>,
}

/// The one reader of a `usage` object, for every dialect: read typed from a body (nothing
/// else is built) or from an already parsed stream event. A field of the wrong type reads as
/// absent, never failing the report.
#[derive(Deserialize, Default)]
struct Report {
    #[serde(default)]
    prompt_tokens: Lenient,
    #[serde(default)]
    input_tokens: Lenient,
    #[serde(default)]
    completion_tokens: Lenient,
    #[serde(default)]
    output_tokens: Lenient,
    #[serde(default)]
    prompt_tokens_details: Object<Details>,
    #[serde(default)]
    input_tokens_details: Object<Details>,
    #[serde(default)]
    cache_read_input_tokens: Lenient,
    #[serde(default)]
    cache_creation_input_tokens: Lenient,
}

#[derive(Deserialize, Default)]
struct Details {
    #[serde(default)]
    cached_tokens: Lenient,
}

impl Report {
    fn raw(&self) -> Raw {
        let cached = |d: &Object<Details>| d.0.as_ref().and_then(|d| d.cached_tokens.0);
        Raw {
            prompt: self.prompt_tokens.0,
            input: self.input_tokens.0,
            completion: self.completion_tokens.0.or(self.output_tokens.0),
            cached: cached(&self.prompt_tokens_details)
                .or_else(|| cached(&self.input_tokens_details)),
            cache_read: self.cache_read_input_tokens.0,
            cache_write: self.cache_creation_input_tokens.0,
        }
    }
}

/// A complete answer: its `usage`, or the Responses API's `response.usage`.
#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    usage: Object<Report>,
    #[serde(default)]
    response: Object<Inner>,
}

/// One stream event's usage reports: `usage`, the Responses API's `response.usage` and
/// Anthropic's `message.usage` (`message_start`).
#[derive(Deserialize)]
struct EventBody {
    #[serde(default)]
    usage: Object<Report>,
    #[serde(default)]
    response: Object<Inner>,
    #[serde(default)]
    message: Object<Inner>,
}

#[derive(Deserialize)]
struct Inner {
    #[serde(default)]
    usage: Object<Report>,
}

#[cfg(test)]
#[path = "usage_tests.rs"]
mod tests;
