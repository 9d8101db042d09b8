//! The body of an upstream answer as the relay reads it: hyper's `Incoming`, decoded from gzip
//! when the upstream compressed it, holding its HTTP/2 stream slot until it is dropped.
//!
//! switchyard asks upstreams for `Accept-Encoding: identity` (it must read SSE events and JSON
//! usage), but an upstream that compresses anyway is decoded here, incrementally, so the
//! framer and the JSON reader only ever see plain bytes.
//!
//! A `Transform` may rewrite the decoded bytes on the way (a stream translated into the
//! client's wire format, R16.1): the relay then reads the client's format as if the upstream
//! had spoken it.

use std::io::Write;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::write::GzDecoder;
use http::header::{HeaderMap, CONTENT_ENCODING};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::upstream::h2pool::Slot;

/// A body that could not be read: the connection broke or the gzip stream is corrupt.
#[derive(Debug)]
pub struct UpError(pub String);

impl std::fmt::Display for UpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UpError {}

/// The content coding of an upstream answer, as far as the relay is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Identity,
    Gzip,
    /// Any other coding: the bytes cannot be inspected, only passed through.
    Other,
}

impl Coding {
    pub fn of(h: &HeaderMap) -> Coding {
        let Some(v) = h.get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()) else {
            return Coding::Identity;
        };
        match v.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => Coding::Identity,
            "gzip" | "x-gzip" => Coding::Gzip,
            _ => Coding::Other,
        }
    }
}

/// A rewrite of the decoded body bytes, chunk by chunk (see the module doc).
pub trait Transform: Send {
    /// Rewrite one chunk into `out`; an error breaks the body.
    fn chunk(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), String>;
    /// The upstream body ended: write what remains.
    fn end(&mut self, out: &mut Vec<u8>);
}

/// The upstream body (see the module doc).
pub struct UpBody {
    inner: Incoming,
    gunzip: Option<GzDecoder<Vec<u8>>>,
    done: bool,
    /// In a `Mutex` only to keep the body `Sync` (a `&UpBody` crosses an await in the
    /// relay); it is reached through `get_mut`, never locked.
    transform: Option<Mutex<Box<dyn Transform>>>,
    /// The transform has written its end.
    transform_done: bool,
    _slot: Option<Slot>,
}

impl UpBody {
    pub fn new(inner: Incoming, slot: Option<Slot>) -> UpBody {
        UpBody {
            inner,
            gunzip: None,
            done: false,
            transform: None,
            transform_done: false,
            _slot: slot,
        }
    }

    /// Decode gzip from here on (the answer said `Content-Encoding: gzip`).
    pub fn gunzip(&mut self) {
        self.gunzip = Some(GzDecoder::new(Vec::new()));
    }

    pub fn is_decoding(&self) -> bool {
        self.gunzip.is_some()
    }

    /// Rewrite the (decoded) bytes through `t` from here on.
    pub fn transform(&mut self, t: Box<dyn Transform>) {
        self.transform = Some(Mutex::new(t));
    }

    /// The next decoded frame, before any transform.
    fn poll_plain(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, UpError>>> {
        let this = self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(UpError(e.to_string())))),
                Poll::Ready(Some(Ok(f))) => f,
                Poll::Ready(None) => {
                    this.done = true;
                    let Some(dec) = this.gunzip.as_mut() else {
                        return Poll::Ready(None);
                    };
                    if dec.try_finish().is_err() {
                        return Poll::Ready(Some(Err(UpError("truncated gzip body".into()))));
                    }
                    let rest = std::mem::take(dec.get_mut());
                    if rest.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                }
            };
            let Some(dec) = this.gunzip.as_mut() else {
                return Poll::Ready(Some(Ok(frame)));
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if dec.write_all(&data).is_err() {
                this.done = true;
                return Poll::Ready(Some(Err(UpError("corrupt gzip body".into()))));
            }
            let out = std::mem::take(dec.get_mut());
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = UpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpError>>> {
        let this = self.get_mut();
        if this.transform.is_none() {
            return this.poll_plain(cx);
        }
        loop {
            if this.transform_done {
                return Poll::Ready(None);
            }
            let polled = this.poll_plain(cx);
            let Some(t) = this.transform.as_mut() else {
                return polled;
            };
            let t = t.get_mut().unwrap_or_else(|e| e.into_inner());
            let mut out = Vec::new();
            match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if let Err(e) = t.chunk(&data, &mut out) {
                        this.transform_done = true;
                        return Poll::Ready(Some(Err(UpError(e))));
                    }
                }
                Poll::Ready(None) => {
                    this.transform_done = true;
                    t.end(&mut out);
                }
            }
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.transform.is_some() {
            return self.transform_done;
        }
        self.done || (self.gunzip.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.gunzip.is_some() || self.transform.is_some() {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}
