//! The body of a request to an upstream: its bytes as a few shared buffers. An edit of a
//! large client body (the upstream model, a renamed output-limit key) goes out as the
//! client's own bytes around the replaced ones, written vectored by hyper, instead of a new
//! copy of the whole body; any other body is one buffer.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use smallvec::SmallVec;

use crate::wire::json::Edit;

/// A body from this size is edited by reference instead of copied: below it one copy costs
/// less than the extra buffers (allocations, an iovec each).
pub const SPLICE_MIN: usize = 8 * 1024;

/// What an upstream request sends: buffers written in order, then the end.
#[derive(Debug, Default)]
pub struct UpstreamBody {
    /// Not yet written, in order (empty buffers are never kept). One inline: a spliced body
    /// is large, so its few parts may take an allocation; every request is moved about
    /// with its body, so the common one-buffer body stays small.
    parts: SmallVec<[Bytes; 1]>,
    /// The next part to write.
    next: usize,
    /// Bytes not yet written.
    left: u64,
}

impl UpstreamBody {
    /// `base` with the bytes of each span replaced, sharing `base` for everything kept. The
    /// spans must not overlap and must lie within `base` (the request's one parse found
    /// them); they may come in any order.
    pub fn spliced(base: &Bytes, edits: &mut [Edit<'_>]) -> UpstreamBody {
        edits.sort_unstable_by_key(|(span, _)| span.0);
        let mut body = UpstreamBody::default();
        let mut at = 0;
        for &((start, end), replacement) in edits.iter() {
            body.push(base.slice(at..start));
            body.push(Bytes::copy_from_slice(replacement));
            at = end;
        }
        body.push(base.slice(at..));
        body
    }

    fn push(&mut self, part: Bytes) {
        if !part.is_empty() {
            self.left += part.len() as u64;
            self.parts.push(part);
        }
    }

    /// Bytes still to send (all of them before the first write).
    pub fn len(&self) -> usize {
        usize::try_from(self.left).unwrap_or(usize::MAX)
    }

    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// The buffers still to send, in order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts[self.next..]
    }
}

impl From<Bytes> for UpstreamBody {
    fn from(bytes: Bytes) -> UpstreamBody {
        let mut body = UpstreamBody::default();
        body.push(bytes);
        body
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let Some(part) = this.parts.get_mut(this.next) else {
            return Poll::Ready(None);
        };
        let part = std::mem::take(part);
        this.next += 1;
        this.left -= part.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(part))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn collect(body: UpstreamBody) -> (Vec<u8>, usize) {
        let mut body = body;
        let (mut out, mut frames) = (Vec::new(), 0);
        while let Some(frame) = body.frame().await {
            let data = frame.expect("infallible").into_data().expect("data");
            assert!(!data.is_empty(), "no empty frame is sent");
            out.extend_from_slice(&data);
            frames += 1;
        }
        assert!(body.is_end_stream());
        (out, frames)
    }

    /// A spliced body sends exactly the bytes a copying splice makes, for edits in any
    /// order, at either end and next to each other, and says its length before and while
    /// it is written.
    #[tokio::test]
    async fn a_spliced_body_sends_what_a_copy_would() {
        let base = Bytes::from_static(br#"{"model":"a","max_tokens":5,"messages":[]}"#);
        let model = (9, 12);
        let key = (14, 24);
        let cases: Vec<Vec<Edit<'_>>> = vec![
            vec![(key, b"max_completion_tokens"), (model, b"\"upstream-b\"")],
            vec![(model, b"\"b\"")],
            vec![((0, 1), b"{ "), ((base.len() - 1, base.len()), b" }")],
            vec![((9, 12), b"\"x\""), ((12, 13), b" ,")],
            vec![((0, base.len()), b"{}")],
            vec![],
        ];
        for mut edits in cases {
            let mut copied = base.to_vec();
            let mut sorted = edits.clone();
            sorted.sort_by_key(|(s, _)| std::cmp::Reverse(s.0));
            for ((s, e), r) in sorted {
                copied.splice(s..e, r.iter().copied());
            }
            let body = UpstreamBody::spliced(&base, &mut edits);
            assert_eq!(body.len(), copied.len());
            assert_eq!(body.size_hint().exact(), Some(copied.len() as u64));
            let (sent, frames) = collect(body).await;
            assert_eq!(
                String::from_utf8_lossy(&sent),
                String::from_utf8_lossy(&copied)
            );
            assert!(frames <= 2 * 2 + 1);
        }
    }

    #[tokio::test]
    async fn one_buffer_is_one_frame_and_an_empty_body_none() {
        let (sent, frames) = collect(UpstreamBody::from(Bytes::from_static(b"{}"))).await;
        assert_eq!((sent.as_slice(), frames), (&b"{}"[..], 1));
        let empty = UpstreamBody::from(Bytes::new());
        assert!(empty.is_empty() && empty.is_end_stream());
        assert_eq!(collect(empty).await, (Vec::new(), 0));
    }
}
