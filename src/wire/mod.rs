//! The pure wire layer: code that reads and writes the providers' wire formats, with no I/O
//! and no gateway state. `translate` converts requests, answers, streams and errors between
//! OpenAI Chat Completions, Anthropic Messages and Gemini `generateContent` (R16.1).
pub mod convert;
pub mod dialect;
pub mod hidden;
pub mod json;
mod lenient;
pub mod request;
pub mod sse;
pub mod translate;
pub mod usage;
pub mod usage_stream;
