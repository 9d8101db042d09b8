//! Non-SSE success bodies (R9.7): JSON answers are read whole — bounded — because usage and
//! hidden errors live in them; every other body (audio, files, video downloads) and a JSON
//! answer past the bound are streamed through to the client as they arrive. Nothing that
//! was too large to inspect is ever replayed on another channel.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use crate::http::body::{Aborted, ResponseBody};
use crate::relay::answer::stream::{StreamEnd, StreamObserver};
use crate::upstream::body::UpBody;

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
