//! The body of an upstream answer as the relay reads it: hyper's `Incoming`, decoded from gzip
//! when the upstream compressed it, holding its connection (an HTTP/1.1 connection lent by
//! its pool, or an HTTP/2 stream slot) until it is dropped.
//!
//! switchyard asks upstreams for `Accept-Encoding: identity` (it must read SSE events and JSON
//! usage), but an upstream that compresses anyway is decoded here, incrementally, so the
//! framer and the JSON reader only ever see plain bytes. Decoding is bounded per read
//! (B-bounded-resources): one frame yields at most about [`GUNZIP_OUT`] decoded bytes, the rest
//! of its input waits for the next poll, so a small frame of a highly compressed body never
//! becomes megabytes at once.
//!
//! A `Transform` may rewrite the decoded bytes on the way (a stream translated into the
//! client's wire format, R16.1): the relay then reads the client's format as if the upstream
//! had spoken it.

use std::io::Write;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use flate2::write::GzDecoder;
use futures_util::FutureExt;
use http::header::{HeaderMap, CONTENT_ENCODING};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::upstream::h1pool::Lent;
use crate::upstream::h2pool::Slot;

/// What an answer's body holds of its connection until it is dropped.
pub enum Lease {
    /// An HTTP/1.1 connection: back to its pool if the answer was read to its end.
    H1(Lent),
    /// A stream slot on an HTTP/2 connection.
    H2(Slot),
}

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
    pub fn of(headers: &HeaderMap) -> Coding {
        let Some(v) = headers.get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()) else {
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

/// What [`UpBody::drain`] reads off at most, in bytes and in time, before it closes the
/// connection instead.
pub const DRAIN_MAX_BYTES: usize = 64 * 1024;
pub const DRAIN_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Count `frame` against the `left` bytes [`UpBody::drain`] may still read; `false` once
/// they are used up.
fn within(frame: &Frame<Bytes>, left: &mut usize) -> bool {
    *left = left.saturating_sub(frame.data_ref().map_or(0, Buf::remaining));
    *left > 0
}

/// Decoded bytes one frame yields at most (plus one decoder step, at most 32 KiB).
pub const GUNZIP_OUT: usize = 64 * 1024;

/// Incremental gzip decoding with a per-read expansion bound.
struct Gunzip {
    dec: GzDecoder<Vec<u8>>,
    /// Compressed input not fed to the decoder yet.
    pending: Bytes,
}

impl Gunzip {
    fn new() -> Gunzip {
        Gunzip {
            dec: GzDecoder::new(Vec::new()),
            pending: Bytes::new(),
        }
    }

    fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Feeds pending input until it is used up or about [`GUNZIP_OUT`] bytes are decoded;
    /// returns what was decoded (empty when the input held no whole block yet).
    fn step(&mut self) -> Result<Vec<u8>, UpError> {
        while self.has_pending() && self.dec.get_ref().len() < GUNZIP_OUT {
            // One write decodes at most the decoder's buffer (32 KiB).
            match self.dec.write(&self.pending) {
                Ok(n) if n > 0 => self.pending.advance(n),
                _ => return Err(UpError("corrupt gzip body".into())),
            }
        }
        Ok(std::mem::take(self.dec.get_mut()))
    }

    /// The body ended: the decoder's last bytes, or an error for a truncated stream.
    fn finish(&mut self) -> Result<Vec<u8>, UpError> {
        if self.dec.try_finish().is_err() {
            return Err(UpError("truncated gzip body".into()));
        }
        Ok(std::mem::take(self.dec.get_mut()))
    }
}

/// The upstream body (see the module doc).
pub struct UpBody {
    inner: Incoming,
    /// Boxed: the decoder is ~270 bytes, rarely present (the gateway asks for `identity`),
    /// and the body is moved several times an answer.
    gunzip: Option<Box<Gunzip>>,
    done: bool,
    /// In a `Mutex` only to keep the body `Sync` (a `&UpBody` crosses an await in the
    /// relay); it is reached through `get_mut`, never locked.
    transform: Option<Mutex<Box<dyn Transform>>>,
    /// The transform has written its end.
    transform_done: bool,
    _lease: Option<Lease>,
}

impl UpBody {
    pub fn new(inner: Incoming, lease: Option<Lease>) -> UpBody {
        UpBody {
            inner,
            gunzip: None,
            done: false,
            transform: None,
            transform_done: false,
            _lease: lease,
        }
    }

    /// The relay has all it needs (the stream's last event): read off what the upstream still
    /// sends, normally just its end of body, so the connection goes back to the pool instead
    /// of being closed. What has already arrived is read here; the rest, if any, by a task
    /// that gives up after [`DRAIN_MAX_BYTES`] or [`DRAIN_MAX_WAIT`] (dropping the body then
    /// closes the connection, as dropping it at once would have).
    pub fn drain(self) {
        let UpBody {
            mut inner, _lease, ..
        } = self;
        let mut left = DRAIN_MAX_BYTES;
        loop {
            match inner.frame().now_or_never() {
                Some(Some(Ok(frame))) if within(&frame, &mut left) => {}
                Some(_) => return,
                None => break,
            }
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            // Dropped after the body is read off: an HTTP/1.1 connection then goes back.
            let _lease = _lease;
            let read_off = async {
                while let Some(Ok(frame)) = inner.frame().await {
                    if !within(&frame, &mut left) {
                        return;
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_MAX_WAIT, read_off).await;
        });
    }

    /// Decode gzip from here on (the answer said `Content-Encoding: gzip`).
    pub fn gunzip(&mut self) {
        self.gunzip = Some(Box::new(Gunzip::new()));
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
            if let Some(dec) = this.gunzip.as_mut().filter(|d| d.has_pending()) {
                match dec.step() {
                    Err(e) => {
                        this.done = true;
                        dec.pending.clear();
                        return Poll::Ready(Some(Err(e)));
                    }
                    Ok(out) if !out.is_empty() => {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                    Ok(_) => continue,
                }
            }
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
                    return match dec.finish() {
                        Err(e) => Poll::Ready(Some(Err(e))),
                        Ok(rest) if rest.is_empty() => Poll::Ready(None),
                        Ok(rest) => Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest))))),
                    };
                }
            };
            let Some(dec) = this.gunzip.as_mut() else {
                return Poll::Ready(Some(Ok(frame)));
            };
            if let Ok(data) = frame.into_data() {
                dec.pending = data;
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
            let Some(transform) = this.transform.as_mut() else {
                return polled;
            };
            let transform = transform.get_mut().unwrap_or_else(|e| e.into_inner());
            let mut out = Vec::new();
            match polled {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if let Err(e) = transform.chunk(&data, &mut out) {
                        this.transform_done = true;
                        return Poll::Ready(Some(Err(UpError(e))));
                    }
                }
                Poll::Ready(None) => {
                    this.transform_done = true;
                    transform.end(&mut out);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16 KiB frame of a gzip bomb (8 MiB of zeros) comes out as many bounded pieces,
    /// not 8 MiB at once, and decodes to exactly the original.
    #[test]
    fn a_compressed_frame_decodes_in_bounded_pieces() {
        let plain = vec![0u8; 8 << 20];
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&plain).unwrap();
        let packed = enc.finish().unwrap();
        assert!(packed.len() <= 16 * 1024, "{}", packed.len());
        let mut gunzip = Gunzip::new();
        gunzip.pending = Bytes::from(packed);
        let (mut total, mut biggest, mut pieces) = (0, 0, 0);
        while gunzip.has_pending() {
            let out = gunzip.step().unwrap();
            assert!(out.iter().all(|b| *b == 0));
            biggest = biggest.max(out.len());
            total += out.len();
            pieces += 1;
        }
        total += gunzip.finish().unwrap().len();
        assert_eq!(total, plain.len());
        assert!(biggest <= GUNZIP_OUT + 32 * 1024, "{biggest}");
        assert!(pieces > 8, "{pieces}");
    }

    #[test]
    fn corrupt_and_truncated_streams_are_errors() {
        let mut gunzip = Gunzip::new();
        gunzip.pending = Bytes::from_static(b"not gzip at all");
        assert!(gunzip.step().is_err());
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"hello").unwrap();
        let packed = enc.finish().unwrap();
        let mut gunzip = Gunzip::new();
        gunzip.pending = Bytes::copy_from_slice(&packed[..packed.len() - 4]);
        while gunzip.has_pending() {
            gunzip.step().unwrap();
        }
        assert!(gunzip.finish().is_err());
    }
}
