//! Non-SSE success bodies (R9.7): JSON answers are read whole — bounded — because usage and
//! hidden errors live in them; every other body (audio, files, video downloads) and a JSON
//! answer past the bound are streamed through to the client as they arrive. Nothing that
//! was too large to inspect is ever replayed on another channel.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, CONTENT_TYPE};
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};

use crate::http::body::{Aborted, ResponseBody};
use crate::relay::stream::{StreamEnd, StreamObserver};
use crate::routing::policy::TransportKind;
use crate::upstream::body::UpBody;

/// Largest JSON answer read into memory for inspection; a larger one is streamed through.
pub const MAX_INSPECTED_BODY: usize = 8 * 1024 * 1024;

/// Is this answer one that must be inspected (JSON, or untyped)?
pub fn is_json(h: &HeaderMap) -> bool {
    let Some(ct) = h.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let ct = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    ct.is_empty() || ct == "application/json" || ct.ends_with("+json")
}

/// A non-stream body read for inspection.
pub enum Read {
    /// The whole body, within the bound.
    Whole(Bytes),
    /// The first bytes of a body past the bound; the rest is still in the upstream body.
    TooLarge(Bytes),
}

/// Read a JSON answer before `deadline`: whole when it fits [`MAX_INSPECTED_BODY`].
pub async fn read_json(body: &mut UpBody, deadline: Instant) -> Result<Read, TransportKind> {
    let mut buf = BytesMut::new();
    loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(TransportKind::BodyTimeout),
            Ok(None) => return Ok(Read::Whole(buf.freeze())),
            Ok(Some(Err(_))) => return Err(TransportKind::Broken),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() > MAX_INSPECTED_BODY {
                        return Ok(Read::TooLarge(buf.freeze()));
                    }
                }
            }
        }
    }
}

/// The first bytes of a pass-through body before `deadline`; `None` when it is empty.
pub async fn first_chunk(
    body: &mut UpBody,
    deadline: Instant,
) -> Result<Option<Bytes>, TransportKind> {
    loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(TransportKind::BodyTimeout),
            Ok(None) => return Ok(None),
            Ok(Some(Err(_))) => return Err(TransportKind::Broken),
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(d) if !d.is_empty() => return Ok(Some(d)),
                _ => {}
            },
        }
    }
}

/// Commit a pass-through body: `head` at once, then the rest of `body` as it arrives. A body
/// silent for `idle`, or one that breaks, aborts the client's response (it must not look
/// whole); the client leaving drops the upstream body at once (R9.8).
pub fn commit(
    head: Bytes,
    body: UpBody,
    idle: Duration,
    obs: Box<dyn StreamObserver>,
) -> ResponseBody {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let end = pump(head, body, idle, &tx).await;
        obs.end(end);
    });
    ResponseBody::Channel(rx)
}

async fn pump(
    head: Bytes,
    mut body: UpBody,
    idle: Duration,
    tx: &mpsc::Sender<Result<Bytes, Aborted>>,
) -> StreamEnd {
    if tx.send(Ok(head)).await.is_err() {
        return StreamEnd::ClientCancel;
    }
    loop {
        let next = tokio::select! {
            biased;
            _ = tx.closed() => return StreamEnd::ClientCancel,
            f = tokio::time::timeout(idle, body.frame()) => f,
        };
        match next {
            Ok(None) => return StreamEnd::Complete,
            Ok(Some(Ok(frame))) => {
                let Ok(d) = frame.into_data() else { continue };
                if tx.send(Ok(d)).await.is_err() {
                    return StreamEnd::ClientCancel;
                }
            }
            Err(_) | Ok(Some(Err(_))) => {
                let _ = tx.send(Err(Aborted)).await;
                return StreamEnd::Incomplete;
            }
        }
    }
}
