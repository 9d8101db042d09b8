//! The pure wire layer: code that reads and writes the providers' wire formats, with no I/O,
//! no clock and no gateway state (`tests/layers.rs` holds it to that): the request body's one
//! parse and byte-preserving edits (`request`, its fast pass `scan`, `json`, `lenient`), SSE framing (`sse`) and the first look at each event (`peek`), what
//! events and error bodies mean per format (`dialect`, `hidden`), usage (`usage`,
//! `usage_stream`), stream policies (`convert`), and `translate`, which converts requests,
//! answers, streams and errors between OpenAI Chat Completions, Anthropic Messages and
//! Gemini `generateContent` (R16.1).
pub mod convert;
pub mod dialect;
pub mod hidden;
pub mod json;
mod lenient;
pub mod peek;
pub mod request;
pub mod scan;
pub mod sse;
pub mod tokens;
pub mod translate;
pub mod usage;
pub mod usage_stream;
