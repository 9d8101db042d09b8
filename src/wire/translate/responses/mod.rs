//! The OpenAI Responses API (`/v1/responses`) on channels that do not serve it (R16.4, issue
//! 28): a Responses request as Chat Completions (and, through the existing Chat translator,
//! as Anthropic Messages or Gemini), and the upstream's answer and stream back as a Responses
//! object and its typed events. Pure code: no I/O, no clock.
//!
//! Composition (see `README.md` next to this file): this module writes and reads Chat
//! Completions only. Other upstreams go through the existing translators:
//!
//! * request: Responses → Chat (`request`) → `translate_request(OpenAi, upstream, ..)`;
//! * answer: `translate_answer(upstream, OpenAi, ..)` (also for an OpenAI upstream: it reads
//!   hidden errors and normalises the answer) → Responses (`answer`);
//! * stream: `StreamTranslator(upstream → OpenAi)` → Chat chunks → typed events (`stream`).
#![doc = include_str!("README.md")]

mod answer;
mod events;
mod items;
mod output;
mod request;
mod stream;
mod tools;

#[cfg(test)]
mod tests;

pub use answer::answer_from;
pub use request::request_to;
pub use stream::ResponsesStream;
pub use tools::{flatten, split, NAMESPACE_MARKER};

/// A Responses request translated for an upstream, and what the answer's translation needs.
#[derive(Debug, Clone)]
pub struct ResponsesRequest {
    /// The upstream request body (Chat Completions, Messages or Gemini).
    pub body: Vec<u8>,
    /// The client asked for a stream (for Gemini: call `:streamGenerateContent?alt=sse`).
    pub stream: bool,
    /// What was dropped from the request because the upstream cannot run it (for example
    /// `tools[8] web_search`), for the request log.
    pub dropped: Vec<String>,
}
