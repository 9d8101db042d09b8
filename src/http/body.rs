//! The response body every answer is written with — full bytes, a channel fed by a relay
//! task, or a relay the body drives itself — and the small helpers that build JSON answers.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use crate::error::{ClientFormat, GatewayError};

/// A response as every listener writes it.
pub type Resp = Response<ResponseBody>;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Body of every response switchyard writes.
pub enum ResponseBody {
    Full(Option<Bytes>),
    /// Frames pushed by a relay task; dropping the body tells the task the client left. An
    /// `Err` aborts the response (the connection is closed without a clean end of body), so a
    /// client never takes a truncated pass-through body for a whole one.
    Channel(mpsc::Receiver<Result<Bytes, Aborted>>),
    /// Frames pushed by a relay that runs inside the body itself: polled by the connection
    /// that writes the body, only when it can take more, so the frames of one upstream read
    /// and the end of the body go out together and no task or cross-task wake-up is paid.
    /// Dropping the body drops the relay (the client left).
    Relay(Box<Relay>),
}

/// A relay driven by the body it feeds (see [`ResponseBody::Relay`]).
pub struct Relay {
    rx: mpsc::Receiver<Result<Bytes, Aborted>>,
    /// `None` once it has ended (its sender dropped with it).
    pump: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Relay {
    /// The body fed by `pump` through `rx` (the receiver of the sender `pump` holds).
    pub fn body(
        rx: mpsc::Receiver<Result<Bytes, Aborted>>,
        pump: impl Future<Output = ()> + Send + 'static,
    ) -> ResponseBody {
        ResponseBody::Relay(Box::new(Relay {
            rx,
            pump: Some(Box::pin(pump)),
        }))
    }

    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Aborted>>> {
        loop {
            if let Poll::Ready(item) = self.rx.poll_recv(cx) {
                return Poll::Ready(item);
            }
            let Some(pump) = self.pump.as_mut() else {
                return Poll::Pending;
            };
            match pump.as_mut().poll(cx) {
                // Ended: its sender is gone, so the receiver gives what is left, then None.
                Poll::Ready(()) => self.pump = None,
                // Waiting on the upstream (or a timer): whatever it pushed first.
                Poll::Pending => return self.rx.poll_recv(cx),
            }
        }
    }
}

/// The upstream body broke after the response was committed.
#[derive(Debug)]
pub struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream body ended early")
    }
}

impl std::error::Error for Aborted {}

impl ResponseBody {
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(bytes.into()))
    }

    pub fn empty() -> Self {
        ResponseBody::Full(None)
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ResponseBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Channel(rx) => rx
                .poll_recv(cx)
                .map(|o| o.map(|r| r.map(Frame::data).map_err(|e| Box::new(e) as BoxError))),
            ResponseBody::Relay(relay) => relay
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map(Frame::data).map_err(|e| Box::new(e) as BoxError))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(b) => b.is_none(),
            ResponseBody::Channel(_) => false,
            // Its relay has ended and its last frame is taken: the connection writes that
            // frame and the end of the body together.
            ResponseBody::Relay(relay) => relay.pump.is_none() && relay.rx.is_empty(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ResponseBody::Full(None) => SizeHint::with_exact(0),
            ResponseBody::Channel(_) | ResponseBody::Relay(_) => SizeHint::default(),
        }
    }
}

pub fn json_response(status: StatusCode, body: impl Into<bytes::Bytes>) -> Resp {
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub fn error_response(error: &GatewayError, format: ClientFormat) -> Resp {
    json_response(error.status, error.body(format))
}
