//! Request-smuggling guard for HTTP/1 connections (R14.5): follows the framing of every
//! request on a connection and, when a request head carries both `Content-Length` and
//! `Transfer-Encoding`, rewrites that head's `Transfer-Encoding` value so hyper refuses the
//! request with 400 and closes the connection (RFC 9112 §6.1 allows rejecting; hyper on its
//! own would process it by Transfer-Encoding).
//!
//! The tracker is conservative: anything it does not understand (HTTP/2 preface, an
//! unparsable length, an upgrade) switches it to plain pass-through, leaving hyper's own
//! strict parser in charge.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::timer::HeadClock;

/// Where the tracker is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a request head; `line` holds the current line's start offset into `head`.
    Head,
    /// Skipping a fixed-length body.
    Fixed(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// Skipping chunk data (then its CRLF).
    ChunkData(u64),
    /// Reading trailer lines after the last chunk.
    Trailers,
    /// Not tracking any more (h2, upgrade, confusion, or after a rejected request).
    Pass,
}

/// Framing tracker over the bytes a client sends.
#[derive(Debug)]
pub struct Tracker {
    state: State,
    /// The current line (head, chunk size or trailer), bounded.
    line: Vec<u8>,
    /// Head facts so far.
    cl: bool,
    cl_value: Option<u64>,
    chunked: bool,
    te: bool,
    /// (offset in the current read buffer, length) of the TE value, when it is in this read.
    te_span: Option<(usize, usize)>,
    /// Offset in the current read buffer where the current line began (None: an earlier read).
    origin: Option<usize>,
    /// A smuggling-shaped head that could not be rewritten: the connection is refused.
    pub refuse: bool,
    upgrade: bool,
    first: bool,
    /// A line of the current head has been read (the head is under way).
    in_head: bool,
}

const MAX_LINE: usize = 64 * 1024;

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            state: State::Head,
            line: Vec::new(),
            cl: false,
            cl_value: None,
            chunked: false,
            te: false,
            te_span: None,
            origin: None,
            refuse: false,
            upgrade: false,
            first: true,
            in_head: false,
        }
    }
}

impl Tracker {
    /// Feed newly read bytes; may rewrite them in place. Returns true when a smuggling-shaped
    /// head was neutralised in this buffer.
    pub fn feed(&mut self, buf: &mut [u8]) -> bool {
        if self.first && !buf.is_empty() {
            self.first = false;
            if buf.starts_with(b"PRI ") || buf[0] == 0x16 {
                self.state = State::Pass;
            }
        }
        let mut rejected = false;
        self.origin = None;
        let mut i = 0;
        while i < buf.len() {
            match self.state {
                State::Pass => return rejected,
                State::Fixed(n) => {
                    let take = (n as usize).min(buf.len() - i);
                    i += take;
                    let left = n - take as u64;
                    self.state = if left == 0 {
                        State::Head
                    } else {
                        State::Fixed(left)
                    };
                }
                State::ChunkData(n) => {
                    // n counts the data plus its trailing CRLF.
                    let take = (n as usize).min(buf.len() - i);
                    i += take;
                    let left = n - take as u64;
                    self.state = if left == 0 {
                        State::ChunkSize
                    } else {
                        State::ChunkData(left)
                    };
                }
                State::Head | State::ChunkSize | State::Trailers => {
                    let nl = memchr::memchr(b'\n', &buf[i..]);
                    let end = nl.map_or(buf.len(), |p| i + p);
                    if self.line.len() + (end - i) > MAX_LINE {
                        self.state = State::Pass;
                        continue;
                    }
                    if nl.is_none() {
                        // The line goes on in the next read: keep its start.
                        self.line.extend_from_slice(&buf[i..end]);
                        break;
                    }
                    let head_ended = if self.line.is_empty() {
                        // The whole line is in this read: read in place, not copied.
                        self.origin = Some(i);
                        self.line_done(trim_cr(&buf[i..end]))
                    } else {
                        self.line.extend_from_slice(&buf[i..end]);
                        // The scratch line keeps its capacity for the next one.
                        let mut line = std::mem::take(&mut self.line);
                        let ended = self.line_done(trim_cr(&line));
                        line.clear();
                        self.line = line;
                        ended
                    };
                    if head_ended {
                        rejected |= self.end_of_head(buf);
                    }
                    self.origin = None;
                    i = end + 1;
                }
            }
        }
        // A TE value seen in an earlier read cannot be rewritten any more.
        self.te_span = None;
        rejected
    }

    /// A complete line (its CR trimmed); true when it ended a request head (the empty
    /// line), whose framing [`Self::end_of_head`] then decides.
    fn line_done(&mut self, line: &[u8]) -> bool {
        match self.state {
            State::Head => self.head_line(line),
            State::ChunkSize => {
                let hex = line.split(|&c| c == b';').next().unwrap_or(b"");
                let size = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|s| u64::from_str_radix(s.trim(), 16).ok());
                self.state = match size {
                    Some(0) => State::Trailers,
                    Some(n) => State::ChunkData(n.saturating_add(2)),
                    None => State::Pass,
                };
                false
            }
            State::Trailers => {
                if line.is_empty() {
                    self.state = State::Head;
                }
                false
            }
            _ => false,
        }
    }

    /// One line of a request head: the request line or a header, whose framing facts are
    /// noted; true for the empty line that ends the head.
    fn head_line(&mut self, line: &[u8]) -> bool {
        if line.is_empty() {
            return true;
        }
        self.in_head = true;
        let Some(colon) = memchr::memchr(b':', line) else {
            return false; // request line
        };
        let name = &line[..colon];
        let value = &line[colon + 1..];
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        match () {
            _ if is(b"content-length") => {
                self.cl = true;
                self.cl_value = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
            }
            _ if is(b"transfer-encoding") => {
                self.te = true;
                let encoding = String::from_utf8_lossy(value).to_ascii_lowercase();
                self.chunked = encoding.trim_end().ends_with("chunked");
                // The value's bytes in this buffer, when the whole line is in it.
                self.te_span = self.origin.map(|o| (o + colon + 1, line.len() - colon - 1));
            }
            _ if is(b"upgrade") => self.upgrade = true,
            _ => {}
        }
        false
    }

    /// The head ended (its empty line is at hand): decide the body framing, neutralising a
    /// smuggling-shaped head in `buf` (this read) when its TE value is in it. True when the
    /// head was smuggling-shaped.
    fn end_of_head(&mut self, buf: &mut [u8]) -> bool {
        let smuggle = self.cl && self.te;
        let mut rejected = false;
        if smuggle {
            match self.te_span.filter(|(s, l)| l > &0 && s + l <= buf.len()) {
                Some((start, len)) => {
                    // Same length, not chunked: hyper answers 400 and closes the connection.
                    for (k, b) in buf[start..start + len].iter_mut().enumerate() {
                        *b = if k == 0 { b' ' } else { b'x' };
                    }
                }
                // The TE line arrived in an earlier read: refuse the connection instead.
                None => self.refuse = true,
            }
            rejected = true;
            self.state = State::Pass;
        } else if self.upgrade {
            self.state = State::Pass;
        } else if self.te {
            self.state = if self.chunked {
                State::ChunkSize
            } else {
                State::Pass
            };
        } else if self.cl {
            self.state = match self.cl_value {
                Some(0) => State::Head,
                Some(n) => State::Fixed(n),
                None => State::Pass,
            };
        } else {
            self.state = State::Head;
        }
        self.cl = false;
        self.cl_value = None;
        self.te = false;
        self.chunked = false;
        self.upgrade = false;
        self.in_head = false;
        rejected
    }

    /// Where the next request head stands after the bytes fed so far (`timer`).
    pub fn head(&self) -> Progress {
        match self.state {
            State::Pass => Progress::Untracked,
            State::Head if self.in_head || !self.line.is_empty() => Progress::Incomplete,
            _ => Progress::Between,
        }
    }
}

/// Where a connection's next request head stands, by its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// No head under way: idle, or in a body.
    Between,
    /// Part of a head has arrived, not its end.
    Incomplete,
    /// The framing is not followed (HTTP/2, an upgrade, a framing not understood).
    Untracked,
}

/// An I/O stream whose incoming bytes pass through a [`Tracker`].
pub struct Sniffed<T> {
    inner: T,
    tracker: Tracker,
    /// When the current head began, for hyper's header-read timer (`timer`).
    clock: Arc<HeadClock>,
}

impl<T> Sniffed<T> {
    pub fn new(inner: T, clock: Arc<HeadClock>) -> Self {
        Sniffed {
            inner,
            tracker: Tracker::default(),
            clock,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Sniffed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        if this.tracker.refuse {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request smuggling shape",
            )));
        }
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            let new = &mut buf.filled_mut()[before..];
            let rejected = this.tracker.feed(new);
            match this.tracker.head() {
                Progress::Between => this.clock.between(),
                Progress::Incomplete => this.clock.incomplete(),
                Progress::Untracked => this.clock.untracked(),
            }
            if rejected {
                tracing::info!(
                    "refused a request carrying both Content-Length and Transfer-Encoding"
                );
                if this.tracker.refuse {
                    buf.set_filled(before);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "request smuggling shape",
                    )));
                }
            }
        }
        poll
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Sniffed<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The line without its trailing CR.
fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
#[path = "sniff_tests.rs"]
mod tests;
