//! The body of an upstream answer as the relay reads it: hyper's `Incoming`, decoded from gzip
//! when the upstream compressed it, holding its HTTP/2 stream slot until it is dropped.
//!
//! switchyard asks upstreams for `Accept-Encoding: identity` (it must read SSE events and JSON
//! usage), but an upstream that compresses anyway is decoded here, incrementally, so the
//! framer and the JSON reader only ever see plain bytes.

use std::io::Write;
use std::pin::Pin;
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

/// The upstream body (see the module doc).
pub struct UpBody {
    inner: Incoming,
    gunzip: Option<GzDecoder<Vec<u8>>>,
    done: bool,
    _slot: Option<Slot>,
}

impl UpBody {
    pub fn new(inner: Incoming, slot: Option<Slot>) -> UpBody {
        UpBody {
            inner,
            gunzip: None,
            done: false,
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
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = UpError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpError>>> {
        let this = self.get_mut();
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

    fn is_end_stream(&self) -> bool {
        self.done || (self.gunzip.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.gunzip.is_some() {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}
