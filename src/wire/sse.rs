//! SSE framing of upstream streams: split into events, drop `id:` lines on OpenAI formats,
//! detect terminal events per endpoint format, and the gateway's own events (keepalive,
//! `stream_incomplete`) in each format (R9.1, R9.2, R9.4).
//!
//! Hand-written rather than a crate: the relay must pass upstream bytes through unchanged
//! (only `id:` lines are removed) while looking at each event, and must never re-encode.

use bytes::{Bytes, BytesMut};

/// The stream dialect of the endpoint the client called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFormat {
    /// `/v1/chat/completions` and `/v1/completions`: `data: [DONE]` or a `finish_reason`.
    Chat,
    /// `/v1/responses`: a terminal `response.*` event.
    Responses,
    /// `/v1/messages`: `message_stop`.
    Messages,
    /// Anything else: passed through, no terminal event known.
    Other,
}

/// One complete SSE event as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The bytes to forward (the event as received, minus `id:` lines when stripping).
    pub raw: Bytes,
    pub name: Option<String>,
    /// `data:` lines joined with '\n' (None when the event had none).
    pub data: Option<String>,
    /// Only comments (e.g. `: keepalive`): no `data`, no `event`.
    pub comment_only: bool,
}

/// Largest incomplete event the framer holds (bytes): an upstream that sends more without
/// ending an event is hostile or broken, and its stream fails instead of growing memory.
pub const MAX_PENDING: usize = 16 * 1024 * 1024;

/// Incremental splitter: push upstream chunks, pull complete events. Read boundaries are not
/// event boundaries: a chunk may hold several events or part of one, split anywhere (inside a
/// UTF-8 character, between `\r` and `\n`). Lines end in `\n`, `\r\n` or `\r`.
#[derive(Debug, Default)]
pub struct Framer {
    buf: BytesMut,
    /// Next byte to examine; everything before it is scanned.
    scan: usize,
    /// Start of the line being scanned.
    line_start: usize,
    strip_ids: bool,
}

impl Framer {
    pub fn new(strip_ids: bool) -> Self {
        Framer {
            strip_ids,
            ..Framer::default()
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes held that do not yet form a complete event.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The incomplete event held is larger than [`MAX_PENDING`].
    pub fn overflowed(&self) -> bool {
        self.buf.len() > MAX_PENDING
    }

    /// The upstream ended: complete a final event that lacked its blank line, so the next
    /// calls to [`Framer::next_event`] return every event received.
    pub fn finish(&mut self) {
        match self.buf.last() {
            None => {}
            Some(_) if self.buf.iter().all(|c| matches!(c, b'\n' | b'\r')) => self.clear(),
            Some(b'\n') => self.buf.extend_from_slice(b"\n"),
            Some(_) => self.buf.extend_from_slice(b"\n\n"),
        }
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.scan = 0;
        self.line_start = 0;
    }

    /// The next complete event, if the buffer holds one.
    pub fn next_event(&mut self) -> Option<Event> {
        let end = self.find_event_end()?;
        let raw = self.buf.split_to(end).freeze();
        self.scan = 0;
        self.line_start = 0;
        Some(parse_event(raw, self.strip_ids))
    }

    /// Find the end (exclusive) of the first event: the byte after an empty line. Each byte
    /// is examined once however the event was split into chunks.
    fn find_event_end(&mut self) -> Option<usize> {
        let b = &self.buf[..];
        let mut i = self.scan;
        while i < b.len() {
            let Some(p) = memchr::memchr2(b'\n', b'\r', &b[i..]) else {
                i = b.len();
                break;
            };
            i += p;
            let mut next = i + 1;
            if b[i] == b'\r' {
                if next >= b.len() {
                    // A CR at the very end: wait for a possible LF.
                    break;
                }
                if b[next] == b'\n' {
                    next += 1;
                }
            }
            if i == self.line_start {
                return Some(next);
            }
            self.line_start = next;
            i = next;
        }
        self.scan = i;
        None
    }
}

/// The lines of `raw` with their terminators (`\n`, `\r\n` or `\r`): (line, line + terminator).
fn lines(raw: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut rest = raw;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (line_len, full) = match memchr::memchr2(b'\n', b'\r', rest) {
            None => (rest.len(), rest.len()),
            Some(p) if rest[p] == b'\r' && rest.get(p + 1) == Some(&b'\n') => (p, p + 2),
            Some(p) => (p, p + 1),
        };
        let out = (&rest[..line_len], &rest[..full]);
        rest = &rest[full..];
        Some(out)
    })
}

fn parse_event(raw: Bytes, strip_ids: bool) -> Event {
    let mut name = None;
    let mut data: Option<String> = None;
    let mut has_id = false;
    let mut comment_only = true;
    for (line, _) in lines(&raw) {
        if line.is_empty() || line[0] == b':' {
            continue;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(p) => (
                &line[..p],
                line[p + 1..].strip_prefix(' ').unwrap_or(&line[p + 1..]),
            ),
            None => (&line[..], ""),
        };
        match field {
            "event" => {
                comment_only = false;
                name = Some(value.to_string());
            }
            "data" => {
                comment_only = false;
                match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                }
            }
            "id" => has_id = true,
            _ => comment_only = false,
        }
    }
    let raw = if strip_ids && has_id {
        strip_id_lines(&raw)
    } else {
        raw
    };
    Event {
        raw,
        name,
        data,
        comment_only,
    }
}

fn strip_id_lines(raw: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(raw.len());
    for (line, full) in lines(raw) {
        if !(line.starts_with(b"id:") || line == b"id") {
            out.extend_from_slice(full);
        }
    }
    out.freeze()
}

/// Does this event end the stream for `format`? (R9.4)
pub fn is_terminal(format: StreamFormat, ev: &Event) -> bool {
    let data = ev.data.as_deref().unwrap_or("");
    match format {
        StreamFormat::Chat => {
            if data.trim() == "[DONE]" {
                return true;
            }
            if !data.contains("finish_reason") {
                return false;
            }
            serde_json::from_str::<serde_json::Value>(data)
                .ok()
                .is_some_and(|v| {
                    v["choices"]
                        .as_array()
                        .is_some_and(|cs| cs.iter().any(|c| c["finish_reason"].is_string()))
                })
        }
        StreamFormat::Responses => {
            let ty = ev
                .name
                .as_deref()
                .map(str::to_string)
                .or_else(|| json_type(data));
            matches!(
                ty.as_deref(),
                Some("response.completed" | "response.failed" | "response.incomplete")
            )
        }
        StreamFormat::Messages => {
            ev.name.as_deref() == Some("message_stop")
                || json_type(data).as_deref() == Some("message_stop")
        }
        StreamFormat::Other => false,
    }
}

fn json_type(data: &str) -> Option<String> {
    if !data.contains("\"type\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    v["type"].as_str().map(str::to_string)
}

/// A 200 stream whose first event is only an error object (R9.5): the embedded status, if any.
pub fn hidden_error(ev: &Event) -> Option<Option<u16>> {
    let data = ev.data.as_deref()?;
    if !data.contains("\"error\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(data).ok()?;
    crate::wire::hidden::embedded_error(&v)
}

/// An event that opens a stream without content: held back until the first content-bearing
/// (or terminal) event, so an error that follows it can still fail over (R9.3). Anthropic
/// sends `message_start` and `ping`; the Responses API `response.created` and
/// `response.in_progress`.
pub fn is_preamble(format: StreamFormat, ev: &Event) -> bool {
    let ty = || {
        ev.name
            .clone()
            .or_else(|| json_type(ev.data.as_deref().unwrap_or("")))
    };
    match format {
        StreamFormat::Messages => matches!(ty().as_deref(), Some("message_start" | "ping")),
        StreamFormat::Responses => matches!(
            ty().as_deref(),
            Some("response.created" | "response.in_progress")
        ),
        StreamFormat::Chat | StreamFormat::Other => false,
    }
}

/// An event before the commit point that fails the attempt: a hidden error (R9.5), or a
/// Responses `error` / `response.failed` event. The status to classify it with.
pub fn pre_commit_error(format: StreamFormat, ev: &Event) -> Option<u16> {
    if let Some(code) = hidden_error(ev) {
        return Some(code.unwrap_or(502));
    }
    if format != StreamFormat::Responses {
        return None;
    }
    let ty = ev
        .name
        .clone()
        .or_else(|| json_type(ev.data.as_deref().unwrap_or("")));
    matches!(ty.as_deref(), Some("error" | "response.failed")).then_some(502)
}

/// The keepalive to inject after silence (R9.2): a comment, or Anthropic's native ping.
pub fn keepalive(format: StreamFormat) -> Bytes {
    match format {
        StreamFormat::Messages => {
            Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n")
        }
        _ => Bytes::from_static(b": keepalive\n\n"),
    }
}

/// The explicit error that closes a stream cut before its terminal event (R9.4).
pub fn incomplete_event(format: StreamFormat, detail: &str) -> Bytes {
    let msg = format!(
        "upstream stream ended before its terminal event ({detail}); the answer is incomplete"
    );
    let s = match format {
        StreamFormat::Messages => format!(
            "event: error\ndata: {}\n\n",
            serde_json::json!({"type":"error","error":{"type":"api_error","message":msg,"code":"stream_incomplete"}})
        ),
        StreamFormat::Responses => format!(
            "event: error\ndata: {}\n\n",
            serde_json::json!({"type":"error","code":"stream_incomplete","message":msg,"param":null})
        ),
        StreamFormat::Chat | StreamFormat::Other => format!(
            "data: {}\n\n",
            serde_json::json!({"error":{"message":msg,"type":"api_error","code":"stream_incomplete"}})
        ),
    };
    Bytes::from(s)
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
