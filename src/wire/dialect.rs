//! What stream events mean in each endpoint's dialect (R9.2–R9.5): which event ends a stream,
//! which only opens it (held back until the commit point), which is an error before content,
//! which chat chunk carries only usage; the gateway's own events (keepalive,
//! `stream_incomplete`) in each format; and the fields of an upstream error body. The checks
//! every event meets read its first look (`Event::peek`); the rest its one JSON parse
//! (`Event::json`).

use bytes::Bytes;
use serde_json::Value;

use super::hidden::embedded_error;
use super::peek::EventPeek;
use super::sse::Event;

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

impl StreamFormat {
    /// The dialect of the (normalised) path the client called.
    pub fn of_path(path: &str) -> StreamFormat {
        match path {
            "/v1/chat/completions" | "/v1/completions" => StreamFormat::Chat,
            "/v1/responses" => StreamFormat::Responses,
            "/v1/messages" => StreamFormat::Messages,
            _ => StreamFormat::Other,
        }
    }

    /// OpenAI formats carry `id:` lines the client must not see (they are dropped).
    pub fn strips_ids(self) -> bool {
        self != StreamFormat::Messages && self != StreamFormat::Other
    }
}

/// Does this event end the stream for `format`? (R9.4)
pub fn is_terminal(format: StreamFormat, ev: &Event) -> bool {
    match format {
        StreamFormat::Chat => {
            if ev.data.as_deref().is_some_and(is_done) {
                return true;
            }
            ev.peek().choices.is_some_and(|c| c.finish)
        }
        StreamFormat::Responses => matches!(
            ev.kind(),
            Some("response.completed" | "response.failed" | "response.incomplete")
        ),
        StreamFormat::Messages => {
            ev.name.as_deref() == Some("message_stop") || ev.json_type() == Some("message_stop")
        }
        StreamFormat::Other => false,
    }
}

/// The first byte of `data` that is not ASCII whitespace (`char::is_whitespace`'s ASCII
/// part: tab, line feed, vertical tab, form feed, carriage return, space).
fn first_visible(data: &str) -> Option<u8> {
    data.bytes().find(|b| !matches!(b, b'\t'..=b'\r' | b' '))
}

/// `data` is `[DONE]` with any whitespace around it, as `str::trim` has it. Every event meets
/// this check up to three times, and its data is nearly always a JSON object: its first
/// visible byte settles it without `trim`, which decodes characters from both ends. Only
/// data that starts with `[` or a non-ASCII character (perhaps Unicode whitespace) is
/// trimmed.
fn is_done(data: &str) -> bool {
    match first_visible(data) {
        Some(b) if b == b'[' || !b.is_ascii() => data.trim() == "[DONE]",
        _ => false,
    }
}

/// `data` is only whitespace (`str::trim` leaves nothing), read like [`is_done`].
fn is_blank(data: &str) -> bool {
    match first_visible(data) {
        None => true,
        Some(b) if !b.is_ascii() => data.trim().is_empty(),
        Some(_) => false,
    }
}

/// Is this the stream's last event, after which nothing more is meant to come (`[DONE]`,
/// `message_stop`, the Responses API's closing `response.*`)? Unlike [`is_terminal`], a chat
/// chunk with a `finish_reason` is not: the usage chunk and `[DONE]` follow it. The relay
/// ends the client's body with this event's write instead of waiting for the upstream's end.
pub fn is_last(format: StreamFormat, ev: &Event) -> bool {
    match format {
        StreamFormat::Chat => ev.data.as_deref().is_some_and(is_done),
        StreamFormat::Responses | StreamFormat::Messages => is_terminal(format, ev),
        StreamFormat::Other => false,
    }
}

/// A 200 stream whose first event is only an error object (R9.5): the embedded status, if any.
pub fn hidden_error(ev: &Event) -> Option<Option<u16>> {
    if !ev.peek().error {
        return None; // only an object with an `error` key can be one
    }
    embedded_error(ev.json()?)
}

/// An event that opens a stream without content: held back until the first content-bearing
/// (or terminal) event, so an error that follows it can still fail over (R9.3). Anthropic
/// sends `message_start`, `ping` and empty `content_block_start`s (text or thinking); the
/// Responses API `response.created` and `response.in_progress`; Chat Completions a chunk
/// whose deltas carry no content, reasoning, tool call or finish reason (the role chunk,
/// Azure's empty-`choices` content-filter chunk).
pub fn is_preamble(format: StreamFormat, ev: &Event) -> bool {
    match format {
        StreamFormat::Messages => match ev.kind() {
            Some("message_start" | "ping") => true,
            Some("content_block_start") => {
                ev.json().is_some_and(|v| empty_block(&v["content_block"]))
            }
            _ => false,
        },
        StreamFormat::Responses => {
            matches!(ev.kind(), Some("response.created" | "response.in_progress"))
        }
        StreamFormat::Chat => empty_chunk(ev.peek()),
        StreamFormat::Other => false,
    }
}

/// A text or thinking block that opens with nothing in it.
fn empty_block(value: &Value) -> bool {
    let empty = |k: &str| value[k].as_str().is_none_or(str::is_empty);
    match value["type"].as_str() {
        Some("text") => empty("text"),
        Some("thinking") => empty("thinking"),
        _ => false,
    }
}

/// A chat chunk that carries nothing of the answer (not an error, not the usage chunk).
fn empty_chunk(peek: &EventPeek) -> bool {
    let Some(choices) = peek.choices else {
        return false;
    };
    if peek.error || (choices.len == 0 && peek.usage) {
        return false;
    }
    choices.blank
}

/// An event an OpenAI-format SDK cannot parse: data that is not JSON (nor `[DONE]`) in a
/// Chat Completions or Responses stream. The official SDKs parse every `data:` line and die
/// on such an event, so the relay drops it (and counts it) rather than forward it.
pub fn is_malformed(format: StreamFormat, ev: &Event) -> bool {
    matches!(format, StreamFormat::Chat | StreamFormat::Responses)
        && !ev.comment_only
        && ev
            .data
            .as_deref()
            .is_some_and(|d| !is_blank(d) && !is_done(d))
        && !ev.peek().json
}

/// The comment a translated stream writes for its held opening: the upstream has proven
/// alive, so the first-byte gate hands over to the idle timer (R9.2). Never relayed.
pub const OPENING_COMMENT: &[u8] = b": opening\n\n";

/// Is this the comment a translated stream writes for its held opening?
pub fn is_opening_comment(ev: &Event) -> bool {
    ev.comment_only && ev.raw.starts_with(b": opening")
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
    matches!(ev.kind(), Some("error" | "response.failed")).then_some(502)
}

/// Is this chat event the usage-only chunk (empty `choices` and a `usage` object)?
pub fn is_usage_chunk(ev: &Event) -> bool {
    let peek = ev.peek();
    peek.usage && peek.choices.is_some_and(|c| c.len == 0)
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
    let frame = match format {
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
    Bytes::from(frame)
}

/// What an upstream error body says, in any dialect: `error.{code,type,message}` (or the
/// same fields at the top level); the message falls back to the body's first 512 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: Option<String>,
    pub kind: Option<String>,
    pub message: String,
}

impl ErrorBody {
    /// Read an error body.
    pub fn read(body: &[u8]) -> ErrorBody {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        ErrorBody::of(parsed.as_ref(), body)
    }

    /// The same reading from an already parsed body (`v`) with its bytes.
    pub fn of(value: Option<&Value>, body: &[u8]) -> ErrorBody {
        let value = value.unwrap_or(&Value::Null);
        let err = if value["error"].is_object() {
            &value["error"]
        } else {
            value
        };
        let text_of = |x: &Value| x.as_str().map(str::to_string);
        ErrorBody {
            code: text_of(&err["code"]),
            kind: text_of(&err["type"]),
            message: text_of(&err["message"]).unwrap_or_else(|| {
                String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()
            }),
        }
    }
}

#[cfg(test)]
#[path = "dialect_tests.rs"]
mod tests;
