//! Stream policies per attempt (R9.6) and the upstream body edits they need: which way the
//! upstream is asked to answer, the `stream` field, and `stream_options.include_usage` for chat
//! streams (usage extraction, R8.5/R11).
//!
//! The body is edited byte-preservingly: only the `stream` value is replaced (or the field is
//! inserted right after the opening brace) and `stream_options` is inserted or rewritten.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::config::model::{Channel, StreamPolicy};
use crate::wire::json;
use crate::wire::request::{self, Peek};

pub mod assemble;
pub mod replay;
mod replay_responses;

/// How one attempt talks to its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The upstream answers the way the client asked.
    Pass,
    /// Client wants JSON; upstream is asked for a stream, assembled into one JSON answer.
    Assemble,
    /// Client wants a stream; upstream is asked for JSON, replayed as SSE.
    Replay,
}

/// The endpoints stream policies apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Chat,
    Messages,
    Responses,
}

impl Dialect {
    pub fn of_path(path: &str) -> Option<Dialect> {
        match path {
            "/v1/chat/completions" => Some(Dialect::Chat),
            "/v1/messages" => Some(Dialect::Messages),
            "/v1/responses" => Some(Dialect::Responses),
            _ => None,
        }
    }
}

/// The upstream side of one attempt: mode, the body to send, and whether the client must not
/// see the usage-only chunk (it was asked for on the client's behalf).
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    pub dialect: Option<Dialect>,
    pub body: Bytes,
    pub hide_usage_chunk: bool,
    /// The client asked for `stream_options.include_usage` (replayed streams carry usage then).
    pub client_include_usage: bool,
    /// The upstream is asked for a stream: the streaming gates apply (R9.2), else the
    /// non-stream timeout governs the whole exchange (R9.7).
    pub upstream_stream: bool,
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow)]
    stream_options: Option<&'a RawValue>,
}

/// Decide the attempt's mode for the channel's `stream_policy` and prepare the upstream body
/// (already model-rewritten): `stream` for a converted mode, `stream_options.include_usage`
/// for chat streams when the channel's `include_usage` is on.
pub fn plan(ch: &Channel, path: &str, peek: Option<&Peek>, body: Bytes) -> Plan {
    plan_with(ch.stream_policy, ch.include_usage, path, peek, body)
}

/// [`plan`] from the two channel settings it reads.
pub fn plan_with(
    policy: StreamPolicy,
    include_usage: bool,
    path: &str,
    peek: Option<&Peek>,
    body: Bytes,
) -> Plan {
    let dialect = Dialect::of_path(path);
    let client_stream = peek.is_some_and(|p| p.stream);
    let mut out = Plan {
        mode: Mode::Pass,
        dialect,
        body,
        hide_usage_chunk: false,
        client_include_usage: false,
        upstream_stream: client_stream,
    };
    let (Some(d), Some(_)) = (dialect, peek) else {
        return out;
    };
    if passes_as_is(d, policy, client_stream) {
        return out;
    }
    out.mode = mode_of(policy, client_stream);
    let upstream_stream = match out.mode {
        Mode::Pass => client_stream,
        Mode::Assemble => true,
        Mode::Replay => false,
    };
    out.upstream_stream = upstream_stream;
    let probe: Option<Probe> = serde_json::from_slice(&out.body).ok();
    let opts = probe.as_ref().and_then(|p| p.stream_options);
    out.client_include_usage = opts.is_some_and(|o| {
        serde_json::from_str::<serde_json::Value>(o.get())
            .ok()
            .is_some_and(|v| v["include_usage"] == serde_json::Value::Bool(true))
    });
    let mut body = out.body.clone();
    if d == Dialect::Chat && upstream_stream && !out.client_include_usage && include_usage {
        body = with_include_usage(&body, opts.map(|o| json::span_of(&out.body, o)));
        out.hide_usage_chunk = out.mode == Mode::Pass;
    }
    if out.mode != Mode::Pass {
        body = with_stream(&body, upstream_stream);
    }
    out.body = body;
    out
}

/// Whether [`plan_with`] sends the body as it is and streams as the client asked: the
/// stream is passed through (the policy leaves it as the client asked), and it is not a
/// Chat Completions stream (whose `stream_options` the plan reads and may add to). The
/// exchange then may send an edited body by reference (`upstream::request_body`).
pub fn keeps_body(policy: StreamPolicy, path: &str, peek: Option<&Peek>) -> bool {
    let (Some(d), Some(p)) = (Dialect::of_path(path), peek) else {
        return true;
    };
    passes_as_is(d, policy, p.stream)
}

/// [`keeps_body`] once the dialect and the client's `stream` are known.
fn passes_as_is(d: Dialect, policy: StreamPolicy, client_stream: bool) -> bool {
    mode_of(policy, client_stream) == Mode::Pass && !(d == Dialect::Chat && client_stream)
}

/// The stream mode a channel's policy gives a request that asked for `client_stream`.
fn mode_of(policy: StreamPolicy, client_stream: bool) -> Mode {
    match (policy, client_stream) {
        (StreamPolicy::ForceStream, false) => Mode::Assemble,
        (StreamPolicy::ForceNonStream, true) => Mode::Replay,
        _ => Mode::Pass,
    }
}

/// The body with `"stream"` set to `on` (the value replaced in place, or the field inserted).
pub fn with_stream(body: &Bytes, on: bool) -> Bytes {
    let value: &[u8] = if on { b"true" } else { b"false" };
    match request::peek(body).ok().and_then(|p| p.stream_span) {
        Some(s) => json::splice(body, s, value),
        None => json::insert_first(
            body,
            if on {
                "\"stream\":true"
            } else {
                "\"stream\":false"
            },
        ),
    }
}

/// The body with `stream_options.include_usage` true; `existing` is the span of the current
/// `stream_options` value (its other members are kept).
fn with_include_usage(body: &Bytes, existing: Option<(usize, usize)>) -> Bytes {
    match existing {
        None => json::insert_first(body, r#""stream_options":{"include_usage":true}"#),
        Some(s) => {
            let mut map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&body[s.0..s.1]).unwrap_or_default();
            map.insert("include_usage".into(), serde_json::Value::Bool(true));
            let text = serde_json::Value::Object(map).to_string();
            json::splice(body, s, text.as_bytes())
        }
    }
}

/// Upstream headers with the content type of the converted answer (SSE or JSON).
pub fn with_content_type(mut headers: HeaderMap, sse: bool) -> HeaderMap {
    let ct = if sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    headers.remove(header::CONTENT_LENGTH);
    headers
}

/// A complete upstream answer, replayed as SSE when the attempt's mode is `Replay` (R9.6);
/// anything that is not a JSON answer of the dialect is returned unchanged.
pub fn replay_if_planned(plan: &Plan, headers: HeaderMap, body: Bytes) -> (HeaderMap, Bytes) {
    let (Mode::Replay, Some(d)) = (plan.mode, plan.dialect) else {
        return (headers, body);
    };
    match replay::replay(d, &body, plan.client_include_usage) {
        Some(sse) => (with_content_type(headers, true), sse),
        None => (headers, body),
    }
}

#[cfg(test)]
mod tests;
