//! SSE framing of upstream streams (R9.1): split any read boundaries into events, drop `id:`
//! lines on OpenAI formats, and parse each event's data as JSON at most once, on first use,
//! for every reader after it (terminal and preamble checks, hidden errors, usage, the
//! usage-only chunk, force_stream assembly) — and most readers need only its first look,
//! `peek`, which builds no tree; a chat stream's framer takes it as it frames each event
//! (`Framer::peeking`). What the events mean per format is in `dialect`.
//!
//! Hand-written rather than a crate: the relay must pass upstream bytes through unchanged
//! (only `id:` lines are removed) while looking at each event, and must never re-encode.

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use bytestring::ByteString;
use serde_json::Value;

use super::peek::{EventPeek, Opening};

/// One complete SSE event as received.
#[derive(Clone)]
pub struct Event {
    /// The bytes to forward (the event as received, minus `id:` lines when stripping).
    pub raw: Bytes,
    pub name: Option<String>,
    /// `data:` lines joined with '\n' (None when the event had none). The one `data:` line
    /// of an event that has one (nearly all) is shared with the received bytes, not copied.
    pub data: Option<ByteString>,
    /// Only comments (e.g. `: keepalive`): no `data`, no `event`.
    pub comment_only: bool,
    /// `data` parsed as JSON, once, by the first reader that asks.
    json: OnceLock<Option<Value>>,
    /// `data` looked at without a tree, once, by the first reader that asks.
    peek: OnceLock<EventPeek>,
    /// The first look a peeking framer took as it framed the event (`Framer::peeking`):
    /// set while the event is still owned, so no reader pays the lock's one-time
    /// initialisation (a futex `Once` per event) for it.
    framed: Option<EventPeek>,
}

impl Event {
    pub fn new(raw: Bytes, name: Option<String>, data: Option<String>, comment_only: bool) -> Self {
        Event::with_data(raw, name, data.map(ByteString::from), comment_only)
    }

    fn with_data(
        raw: Bytes,
        name: Option<String>,
        data: Option<ByteString>,
        comment_only: bool,
    ) -> Self {
        Event {
            raw,
            name,
            data,
            comment_only,
            json: OnceLock::new(),
            peek: OnceLock::new(),
            framed: None,
        }
    }

    /// An event with only `data` (tests and replays).
    pub fn data(data: &str) -> Self {
        Event::new(Bytes::new(), None, Some(data.to_string()), false)
    }

    /// The event's data as JSON: parsed on the first call, shared by every later one;
    /// `None` when there is no data or it is not JSON (`[DONE]`).
    pub fn json(&self) -> Option<&Value> {
        self.json
            .get_or_init(|| serde_json::from_str(self.data.as_deref()?).ok())
            .as_ref()
    }

    /// What the event's data says at a first look (no tree, no allocation): taken by a
    /// peeking framer (`Framer::peeking`) as it framed the event, else read on the first
    /// call; shared by every later one. The relay asks this of every event and parses
    /// the tree (`json`) only for the few the peek says need it.
    pub fn peek(&self) -> &EventPeek {
        if let Some(framed) = &self.framed {
            return framed;
        }
        self.peek.get_or_init(|| {
            self.data
                .as_deref()
                .map(EventPeek::read)
                .unwrap_or_default()
        })
    }

    /// The event's type: its `event:` name, else the `type` of its JSON data.
    pub fn kind(&self) -> Option<&str> {
        self.name.as_deref().or_else(|| self.json_type())
    }

    /// The `type` of the event's JSON data.
    pub fn json_type(&self) -> Option<&str> {
        self.json()?.get("type")?.as_str()
    }
}

/// Events are compared and shown by what was received; whether the data was parsed yet
/// does not matter.
impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        (&self.raw, &self.name, &self.data, self.comment_only)
            == (&other.raw, &other.name, &other.data, other.comment_only)
    }
}

impl Eq for Event {}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw)
            .field("name", &self.name)
            .field("data", &self.data)
            .field("comment_only", &self.comment_only)
            .finish()
    }
}

/// Largest incomplete event the framer holds (bytes): an upstream that sends more without
/// ending an event is hostile or broken, and its stream fails instead of growing memory.
pub const MAX_PENDING: usize = 16 * 1024 * 1024;

/// Incremental splitter: push upstream chunks, pull complete events. Read boundaries are not
/// event boundaries: a chunk may hold several events or part of one, split anywhere (inside a
/// UTF-8 character, between `\r` and `\n`). Lines end in `\n`, `\r\n` or `\r`.
#[derive(Debug, Default)]
pub struct Framer {
    /// The bytes held, copied together: an incomplete event and what came after it.
    buf: BytesMut,
    /// The rest of the last read taken whole (`push_read`), its events still to be split off
    /// uncopied; never held together with `buf` (one of the two is empty).
    read: Bytes,
    /// Next byte to examine; everything before it is scanned.
    scan: usize,
    /// Start of the line being scanned.
    line_start: usize,
    /// Where the first line of the event being scanned ends (its terminator); 0 until then.
    first_eol: usize,
    strip_ids: bool,
    /// Set (`peeking`): each event's first look is taken as it is framed, through the
    /// stream's remembered chunk opening.
    opening: Option<Opening>,
}

impl Framer {
    pub fn new(strip_ids: bool) -> Self {
        Framer {
            strip_ids,
            ..Framer::default()
        }
    }

    /// Take each event's first look (`Event::peek`) as it is framed, through the stream's
    /// remembered chunk opening (`peek::Opening`): for a chat stream, whose every event is
    /// looked at, most of each chunk's opening bytes are then compared instead of read.
    pub fn peeking(mut self) -> Self {
        self.opening = Some(Opening::default());
        self
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.spill();
        self.buf.extend_from_slice(chunk);
    }

    /// [`Framer::push`] of a read the caller owns: when nothing is held (a read that starts
    /// at an event boundary, the common case) it is kept as it came and its events are
    /// slices of it, so a read whose events all go to the client unchanged can leave as the
    /// read itself (`Framer::source`, `http::pieces`). An incomplete event at its end is
    /// copied out once no complete one is left, so a read is never held across a wait.
    pub fn push_read(&mut self, read: Bytes) {
        if self.buf.is_empty() && self.read.is_empty() {
            self.read = read;
        } else {
            self.push(&read);
        }
    }

    /// What is left of a read taken whole (`push_read`), if anything: the events
    /// `next_event` gives from now on until the next push are slices of it.
    pub fn source(&self) -> Option<Bytes> {
        (!self.read.is_empty()).then(|| self.read.clone())
    }

    /// Copy what is left of a read taken whole into `buf` (the scan's offsets stay valid:
    /// `buf` was empty, so the same bytes sit at the same offsets).
    fn spill(&mut self) {
        if !self.read.is_empty() {
            self.buf.extend_from_slice(&self.read);
            self.read = Bytes::new();
        }
    }

    /// Bytes held: the events not taken yet and the start of the next.
    pub fn held(&self) -> usize {
        self.buf.len() + self.read.len()
    }

    /// The incomplete event held is larger than [`MAX_PENDING`].
    pub fn overflowed(&self) -> bool {
        self.held() > MAX_PENDING
    }

    /// The upstream ended: complete a final event that lacked its blank line, so the next
    /// calls to [`Framer::next_event`] return every event received.
    pub fn finish(&mut self) {
        self.spill();
        match self.buf.last() {
            None => {}
            Some(_) if self.buf.iter().all(|c| matches!(c, b'\n' | b'\r')) => self.clear(),
            Some(b'\n') => self.buf.extend_from_slice(b"\n"),
            Some(_) => self.buf.extend_from_slice(b"\n\n"),
        }
    }

    fn clear(&mut self) {
        self.read = Bytes::new();
        self.buf.clear();
        self.scan = 0;
        self.line_start = 0;
        self.first_eol = 0;
    }

    /// The next complete event, if the buffer holds one.
    pub fn next_event(&mut self) -> Option<Event> {
        let Some(end) = self.find_event_end() else {
            // No complete event left: the rest of a read taken whole is copied out.
            self.spill();
            return None;
        };
        let raw = if self.read.is_empty() {
            self.buf.split_to(end).freeze()
        } else {
            self.read.split_to(end)
        };
        let first_eol = std::mem::take(&mut self.first_eol);
        self.scan = 0;
        self.line_start = 0;
        let mut ev = match one_data_line(&raw, first_eol) {
            Some(value) => {
                let data = text_of(&raw, value);
                Event::with_data(raw, None, Some(data), false)
            }
            None => parse_event(raw, self.strip_ids),
        };
        if let (Some(opening), Some(data)) = (self.opening.as_mut(), ev.data.as_deref()) {
            ev.framed = Some(opening.read(data));
        }
        Some(ev)
    }

    /// Find the end (exclusive) of the first event: the byte after an empty line. Each byte
    /// is examined once however the event was split into chunks.
    fn find_event_end(&mut self) -> Option<usize> {
        let buf: &[u8] = if self.read.is_empty() {
            &self.buf
        } else {
            &self.read
        };
        let mut i = self.scan;
        while i < buf.len() {
            let Some(p) = memchr::memchr2(b'\n', b'\r', &buf[i..]) else {
                i = buf.len();
                break;
            };
            i += p;
            let mut next = i + 1;
            if buf[i] == b'\r' {
                if next >= buf.len() {
                    // A CR at the very end: wait for a possible LF.
                    break;
                }
                if buf[next] == b'\n' {
                    next += 1;
                }
            }
            if i == self.line_start {
                return Some(next);
            }
            if self.line_start == 0 {
                self.first_eol = i;
            }
            self.line_start = next;
            i = next;
        }
        self.scan = i;
        None
    }
}

/// The value of the event `raw` when it is the commonest event, one `data:` line ended by
/// `\n` and a blank `\n` (`first_eol`: where its first line ends): read without a second
/// pass over its lines, as `parse_event` reads it.
fn one_data_line(raw: &[u8], first_eol: usize) -> Option<&[u8]> {
    if first_eol == 0 || raw.len() != first_eol + 2 || raw.get(first_eol..)? != b"\n\n" {
        return None;
    }
    let value = raw.get(..first_eol)?.strip_prefix(b"data:")?;
    Some(value.strip_prefix(b" ").unwrap_or(value))
}

/// The lines of `raw` with their terminators (`\n`, `\r\n` or `\r`): (line, line + terminator).
fn lines(raw: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut rest = raw;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (line_len, full) = match memchr::memchr2(b'\n', b'\r', rest) {
            None => (rest.len(), rest.len()),
            Some(p) if rest[p] == b'\r' && rest.get(p + 1) == Some(&b'\n') => (p, p + 2),
            Some(p) => (p, p + 1),
        };
        let out = (&rest[..line_len], &rest[..full]);
        rest = &rest[full..];
        Some(out)
    })
}

fn parse_event(raw: Bytes, strip_ids: bool) -> Event {
    let mut name = None;
    let mut data: Option<ByteString> = None;
    let mut has_id = false;
    let mut comment_only = true;
    for (line, _) in lines(&raw) {
        if line.is_empty() || line[0] == b':' {
            continue;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(p) => (
                &line[..p],
                line[p + 1..].strip_prefix(b" ").unwrap_or(&line[p + 1..]),
            ),
            None => (line, &b""[..]),
        };
        match field {
            b"event" => {
                comment_only = false;
                name = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"data" => {
                comment_only = false;
                data = Some(match data.take() {
                    None => text_of(&raw, value),
                    Some(d) => {
                        let mut joined = String::with_capacity(d.len() + 1 + value.len());
                        joined.push_str(&d);
                        joined.push('\n');
                        joined.push_str(&String::from_utf8_lossy(value));
                        ByteString::from(joined)
                    }
                });
            }
            b"id" => has_id = true,
            _ => comment_only = false,
        }
    }
    let raw = if strip_ids && has_id {
        strip_id_lines(&raw)
    } else {
        raw
    };
    Event::with_data(raw, name, data, comment_only)
}

/// `value` (a slice of `raw`) as text: shared with `raw` when it is UTF-8, else a copy with
/// each invalid sequence replaced by U+FFFD.
fn text_of(raw: &Bytes, value: &[u8]) -> ByteString {
    match ByteString::try_from(raw.slice_ref(value)) {
        Ok(text) => text,
        Err(_) => ByteString::from(String::from_utf8_lossy(value).into_owned()),
    }
}

fn strip_id_lines(raw: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(raw.len());
    for (line, full) in lines(raw) {
        if !(line.starts_with(b"id:") || line == b"id") {
            out.extend_from_slice(full);
        }
    }
    out.freeze()
}

#[cfg(test)]
#[path = "sse_tests.rs"]
pub(crate) mod tests;
