//! `Emit`: what a stream source (the upstream format's reader) tells the client-format writer,
//! and the counters `StreamTranslator` turns into a `StreamStep`.

use super::super::ir::Stop;
use super::super::upstream_error::UpstreamError;
use super::super::usage::Usage;

/// The client-format side of a stream translation. `k` numbers tool calls from 0 in the order
/// they start. Every method appends the client's SSE bytes to `out`.
pub(crate) trait Emit {
    /// The message begins (`message_start` / the role chunk). Later calls start it if needed.
    fn start(&mut self, id: &str, model: &str, usage: &Usage, out: &mut Vec<u8>);
    fn text(&mut self, t: &str, out: &mut Vec<u8>);
    fn thinking(&mut self, t: &str, out: &mut Vec<u8>);
    fn tool_start(&mut self, k: usize, id: &str, name: &str, out: &mut Vec<u8>);
    fn tool_args(&mut self, k: usize, fragment: &str, out: &mut Vec<u8>);
    /// The answer is complete: stop reason, usage, and the client format's terminal event.
    fn finish(&mut self, stop: Stop, stop_sequence: Option<&str>, usage: &Usage, out: &mut Vec<u8>);
    /// An upstream error ends the stream with the client format's error event.
    fn error(&mut self, e: &UpstreamError, out: &mut Vec<u8>);
    fn counters(&self) -> Counters;
}

/// Most tool calls one streamed answer may make; past it the stream is an unreadable answer
/// (bounds the per-fragment lookups a hostile upstream could make quadratic).
pub(crate) const MAX_TOOL_CALLS: usize = 1024;

/// The error for an answer with more than `MAX_TOOL_CALLS` tool calls.
pub(crate) fn too_many_calls(from: super::super::WireFormat) -> UpstreamError {
    UpstreamError::bad_answer(from, format!("more than {MAX_TOOL_CALLS} tool calls"))
}

/// What has been written so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Content-bearing writes (text, reasoning, tool calls): the commit point's signal.
    pub content: u64,
    /// Characters of text, reasoning and tool arguments written (for usage estimates).
    pub chars: u64,
    /// The terminal event (or an error event) was written.
    pub closed: bool,
}

/// Append one SSE event: an optional `event:` line and one `data:` line with `json`.
pub(crate) fn sse(out: &mut Vec<u8>, event: Option<&str>, json: &[u8]) {
    if let Some(e) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(e.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
}

/// Append `s` as a JSON string.
pub(crate) fn json_str(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}
