//! The mock upstream's response body: a whole buffer, or a script of writes, sleeps and an
//! abrupt cut, which counts open streams and clients that left before the end.
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use super::Shared;

/// One step of a scripted body.
#[derive(Debug)]
pub(crate) enum Step {
    Data(Bytes),
    Sleep(Duration),
    /// End the body with an error: hyper then drops the connection (HTTP/1) or resets the
    /// stream (HTTP/2), so the client sees a truncated body.
    Cut,
}

/// The error that makes hyper abort the response.
#[derive(Debug)]
pub struct MockCut;

impl fmt::Display for MockCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("mock upstream cut the stream")
    }
}

impl std::error::Error for MockCut {}

/// Response body of the mock upstream.
pub struct MockBody {
    kind: Kind,
}

enum Kind {
    Full(Option<Bytes>),
    Script(Box<Script>),
}

struct Script {
    steps: VecDeque<Step>,
    sleep: Option<Pin<Box<Sleep>>>,
    finished: bool,
    cut_armed: bool,
    counts_as_stream: bool,
    /// `Content-Length` framing: the declared length.
    length: Option<u64>,
    shared: Arc<Shared>,
}

impl MockBody {
    pub(crate) fn full(b: impl Into<Bytes>) -> Self {
        let b = b.into();
        MockBody {
            kind: Kind::Full(if b.is_empty() { None } else { Some(b) }),
        }
    }

    pub(crate) fn empty() -> Self {
        MockBody {
            kind: Kind::Full(None),
        }
    }

    /// A scripted body; `is_stream` bodies count in `open_streams` while alive.
    pub(crate) fn script(steps: Vec<Step>, is_stream: bool, shared: Arc<Shared>) -> Self {
        if is_stream {
            shared.open_streams.fetch_add(1, Ordering::Relaxed);
        }
        MockBody {
            kind: Kind::Script(Box::new(Script {
                steps: steps.into(),
                sleep: None,
                finished: false,
                cut_armed: false,
                counts_as_stream: is_stream,
                length: None,
                shared,
            })),
        }
    }

    /// Declare `len` as the body's `Content-Length` (a scripted body only).
    pub(crate) fn with_length(mut self, len: u64) -> Self {
        if let Kind::Script(s) = &mut self.kind {
            s.length = Some(len);
        }
        self
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if self.counts_as_stream {
            self.shared.open_streams.fetch_sub(1, Ordering::Relaxed);
        }
        if !self.finished {
            self.shared.disconnects.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = MockCut;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, MockCut>>> {
        match &mut self.get_mut().kind {
            Kind::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Kind::Script(s) => s.poll_step(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Script(s) => s.finished,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Script(s) => s
                .length
                .map_or_else(SizeHint::default, SizeHint::with_exact),
        }
    }
}

impl Script {
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, MockCut>>> {
        loop {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            match self.steps.pop_front() {
                None => {
                    self.finished = true;
                    return Poll::Ready(None);
                }
                Some(Step::Data(b)) => {
                    if self.steps.is_empty() {
                        self.finished = true;
                    }
                    return Poll::Ready(Some(Ok(Frame::data(b))));
                }
                Some(Step::Sleep(d)) => self.sleep = Some(Box::pin(tokio::time::sleep(d))),
                Some(Step::Cut) if !self.cut_armed => {
                    // Yield once so the data written so far is flushed before the cut.
                    self.cut_armed = true;
                    self.steps.push_front(Step::Cut);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Some(Step::Cut) => {
                    self.finished = true;
                    return Poll::Ready(Some(Err(MockCut)));
                }
            }
        }
    }
}
