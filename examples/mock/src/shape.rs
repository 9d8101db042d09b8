//! Shaping a rendered answer into the response a behaviour asks for: delays, keepalives,
//! cuts, error events, floods and padding, then the wire shape (gzip, CRLF, re-chunking,
//! `Content-Length`).
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_ENCODING};
use http::Response;

use super::behavior::{Behavior, Wire};
use super::body::{MockBody, Step};
use super::handler::{with_type, Payload, EVENT_STREAM, GZIP, JSON, NO_CACHE};
use super::json;
use super::request::Endpoint;
use super::sse::{self, SseParts, KEEPALIVE};
use super::Shared;

/// Static filler for `flood` and `pad`.
static XS: [u8; 65536] = [b'x'; 65536];
static SPACES: [u8; 65536] = [b' '; 65536];

fn filler(fill: &'static [u8], mut bytes: usize, out: &mut Vec<Step>) {
    while bytes > 0 {
        let n = bytes.min(fill.len());
        out.push(Step::Data(Bytes::from_static(&fill[..n])));
        bytes -= n;
    }
}

/// The steps of a whole (non-SSE) answer for the behaviour.
fn full_steps(ep: Endpoint, bytes: Bytes, json: bool, b: &Behavior) -> Vec<Step> {
    let half = || bytes.slice(..bytes.len() / 2);
    match b {
        Behavior::Stream { chunks, delay } if !json => {
            // A file download: pieces as they are produced.
            let n = (*chunks).max(1);
            let size = bytes.len().div_ceil(n).max(1);
            let mut v = Vec::new();
            for (i, piece) in bytes.chunks(size).enumerate() {
                if i > 0 {
                    v.push(Step::Sleep(*delay));
                }
                v.push(Step::Data(bytes.slice_ref(piece)));
            }
            v
        }
        Behavior::StallAfterHeaders(d) | Behavior::SlowBody { delay: d } => {
            vec![Step::Sleep(*d), Step::Data(bytes)]
        }
        Behavior::CutMidStream { .. } => vec![Step::Data(half()), Step::Cut],
        Behavior::EndWithoutTerminal { .. } | Behavior::ErrorMidStream { .. } => {
            vec![Step::Data(half())]
        }
        Behavior::KeepaliveThenOk {
            keepalives,
            interval,
        } => {
            let mut v = Vec::with_capacity(keepalives * 2 + 1);
            for _ in 0..*keepalives {
                v.push(Step::Data(Bytes::from_static(b"\n")));
                v.push(Step::Sleep(*interval));
            }
            v.push(Step::Data(bytes));
            v
        }
        Behavior::HiddenError { code } => {
            vec![Step::Data(json::hidden_error(*code, ep.anthropic()).into())]
        }
        Behavior::Pad { bytes: pad } if json && bytes.first() == Some(&b'{') => {
            let mut v = vec![Step::Data(bytes.slice(..1))];
            filler(&SPACES, *pad, &mut v);
            v.push(Step::Data(bytes.slice(1..)));
            v
        }
        _ => vec![Step::Data(bytes)],
    }
}

/// Turns the normal answer into the response the behaviour and the wire shape ask for.
pub(crate) fn shape(
    shared: &Arc<Shared>,
    ep: Endpoint,
    payload: Payload,
    b: Behavior,
    wire: &Wire,
    gzip_ok: bool,
) -> Response<MockBody> {
    let (steps, ctype, is_stream, gzip) = match payload {
        Payload::Full(bytes, ctype) => {
            let json = ctype == JSON || matches!(b, Behavior::HiddenError { .. });
            let steps = full_steps(ep, bytes, json, &b);
            let ctype = if json { JSON } else { ctype };
            (steps, ctype, false, wire.gzip || (gzip_ok && json))
        }
        Payload::Sse(parts) => (sse_steps(ep, parts, b), EVENT_STREAM, true, wire.gzip),
    };
    let plain_write = !gzip && wire == &Wire::default();
    let mut r = match steps.as_slice() {
        [Step::Data(one)] if plain_write && !is_stream => {
            with_type(MockBody::full(one.clone()), ctype)
        }
        _ => {
            let steps = if wire.crlf && is_stream {
                super::wire::crlf(steps)
            } else {
                steps
            };
            let steps = if gzip {
                super::wire::gzip(steps)
            } else {
                steps
            };
            let steps = super::wire::rechunk(steps, wire);
            let cut = steps.iter().any(|s| matches!(s, Step::Cut));
            // A cut `Content-Length` body declares more than it sends.
            let len = super::wire::length(&steps) + if cut { 1024 } else { 0 };
            let mut body = MockBody::script(steps, is_stream, shared.clone());
            if wire.content_length {
                body = body.with_length(len);
            }
            with_type(body, ctype)
        }
    };
    if gzip {
        r.headers_mut().insert(CONTENT_ENCODING, GZIP);
    }
    if is_stream {
        r.headers_mut().insert(CACHE_CONTROL, NO_CACHE);
    }
    r
}

fn sse_steps(ep: Endpoint, p: SseParts, b: Behavior) -> Vec<Step> {
    let SseParts { head, chunks, tail } = p;
    let data = |v: Vec<Bytes>| v.into_iter().map(Step::Data);
    let mut v: Vec<Step> = Vec::with_capacity(head.len() + chunks.len() * 2 + tail.len() + 1);
    match b {
        Behavior::Stream { delay, .. } => {
            v.extend(data(head));
            for (i, c) in chunks.into_iter().enumerate() {
                if i > 0 && delay > Duration::ZERO {
                    v.push(Step::Sleep(delay));
                }
                v.push(Step::Data(c));
            }
            v.extend(data(tail));
        }
        Behavior::CutMidStream { .. } => {
            v.extend(data(head).chain(data(chunks)));
            v.push(Step::Cut);
        }
        Behavior::ThinkSilently(d) => {
            v.extend(data(head));
            v.push(Step::Sleep(d));
            v.extend(data(chunks).chain(data(tail)));
        }
        Behavior::EndWithoutTerminal { .. } => v.extend(data(head).chain(data(chunks))),
        Behavior::HiddenError { code } => v.push(Step::Data(sse::hidden_error(ep, code))),
        Behavior::ErrorAfterStart { code } => {
            v.extend(data(sse::error_after_start(ep, head, code)))
        }
        Behavior::ErrorMidStream { code, .. } => {
            v.extend(data(head).chain(data(chunks)));
            v.extend(data(sse::error_event(ep, code)));
        }
        Behavior::Drip { interval } => {
            v.push(Step::Data(Bytes::from_static(b"data: {\"choices\":[")));
            let steps = (600_000 / interval.as_millis().max(1)).min(600_000) as usize;
            for _ in 0..steps {
                v.push(Step::Sleep(interval));
                v.push(Step::Data(Bytes::from_static(b" ")));
            }
        }
        Behavior::Flood { bytes } => {
            // After the opening and the first content event: a committed stream.
            v.extend(data(head).chain(data(chunks.into_iter().take(1).collect())));
            v.push(Step::Data(Bytes::from_static(b"data: ")));
            filler(&XS, bytes, &mut v);
        }
        other => {
            match other {
                Behavior::StallAfterHeaders(d) | Behavior::SlowBody { delay: d } => {
                    v.push(Step::Sleep(d))
                }
                Behavior::KeepaliveThenOk {
                    keepalives,
                    interval,
                } => {
                    for _ in 0..keepalives {
                        v.push(Step::Data(Bytes::from_static(KEEPALIVE)));
                        v.push(Step::Sleep(interval));
                    }
                }
                _ => {}
            }
            v.extend(data(head).chain(data(chunks)).chain(data(tail)));
        }
    }
    v
}
