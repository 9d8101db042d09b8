//! One validating pass over a JSON request body that finds its top-level members and
//! tallies the token estimate's text (`wire::tokens`) on the way: the fast path of
//! `wire::request::peek`. Strings are skipped with `memchr` (SIMD) instead of byte by byte.
//!
//! The pass accepts only what `serde_json` accepts, and gives up (`None`) on anything it
//! is not sure of: an error, an escaped top-level key, a wanted member given twice, nesting
//! deeper than [`MAX_DEPTH`], a wanted value that is not UTF-8. `peek` then parses with
//! `serde_json`, which decides and words the error, so a body is never accepted here that
//! the full parse would refuse.

use crate::wire::peek::fast::stop;
use crate::wire::tokens::Tally;

/// Deeper nesting is left to `serde_json` (its own limit is 128).
pub const MAX_DEPTH: usize = 100;

/// A top-level member to find, by name; `text` when its value is read as text (as a
/// `&RawValue` is), so must be UTF-8; otherwise it is counted (`Member::elements`) and
/// must be an array (any other value is left to the full parse).
#[derive(Debug, Clone, Copy)]
pub struct Want {
    pub name: &'static str,
    pub text: bool,
}

/// A top-level member the caller asked for: its value's byte range in the body, the value
/// as text when it was wanted as text, and the number of elements when it was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    pub span: (usize, usize),
    pub text: Option<&'a str>,
    pub elements: usize,
}

/// What the pass found: one slot per wanted name (in the order given), and the estimate's
/// tally of every string in the body.
#[derive(Debug)]
pub struct Found<'a, const N: usize> {
    pub members: [Option<Member<'a>>; N],
    pub tally: Tally,
}

/// Scan `body` (a JSON object, whitespace around it) for the top-level members named in
/// `wanted`; `None` when the body must go to the full parse (see the module doc).
pub fn top_members<'a, const N: usize>(body: &'a [u8], wanted: &[Want; N]) -> Option<Found<'a, N>> {
    let mut s = Scanner {
        b: body,
        i: 0,
        tally: Tally::default(),
    };
    let mut members = [None; N];
    s.ws();
    s.object(1, |key, span, elements| {
        let key = &body[key.0..key.1];
        // An escaped key may spell a wanted name: the full parse unescapes it.
        if memchr::memchr(b'\\', key).is_some() || std::str::from_utf8(key).is_err() {
            return None;
        }
        let Some(slot) = wanted.iter().position(|w| w.name.as_bytes() == key) else {
            return Some(());
        };
        let value = &body[span.0..span.1];
        let member = if wanted[slot].text {
            let text = Some(std::str::from_utf8(value).ok()?);
            Member {
                span,
                text,
                elements: 0,
            }
        } else if value.first() == Some(&b'[') {
            Member {
                span,
                text: None,
                elements,
            }
        } else {
            // Counted, any other value is read by the full parse (a number's range, a
            // string's escapes), not skipped: left to it.
            return None;
        };
        match members[slot].replace(member) {
            Some(_) => None, // a duplicate field: the full parse refuses it
            None => Some(()),
        }
    })?;
    s.ws();
    if s.i != body.len() {
        return None;
    }
    Some(Found {
        members,
        tally: s.tally,
    })
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    tally: Tally,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// JSON whitespace: space, tab, line feed, carriage return.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// One value at nesting `depth` (the top-level object is 1); the element count when it
    /// is an array, else 0.
    fn value(&mut self, depth: usize) -> Option<usize> {
        match self.peek()? {
            b'"' => self.string().map(|_| 0),
            b'{' => self.object(depth + 1, |_, _, _| Some(())).map(|()| 0),
            b'[' => self.array(depth + 1),
            b't' => self.literal(b"true").map(|()| 0),
            b'f' => self.literal(b"false").map(|()| 0),
            b'n' => self.literal(b"null").map(|()| 0),
            b'-' | b'0'..=b'9' => self.number().map(|()| 0),
            _ => None,
        }
    }

    /// An object at nesting `depth`; `each` sees every member once its value is read: the
    /// key's content span, the value's span and its element count.
    fn object(
        &mut self,
        depth: usize,
        mut each: impl FnMut((usize, usize), (usize, usize), usize) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.expect(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            let start = self.i;
            let elements = self.value(depth)?;
            each(key, (start, self.i), elements)?;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<usize> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.expect(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(0);
        }
        let mut n = 0;
        loop {
            self.value(depth)?;
            n += 1;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b']' => return Some(n),
                _ => return None,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {
                if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return None; // a leading zero
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digits1()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digits1()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn digits1(&mut self) -> Option<()> {
        let at = self.i;
        self.digits();
        (self.i > at).then_some(())
    }

    /// A string at the cursor: its content's byte range (between the quotes, escapes as
    /// written), tallied for the estimate; the cursor ends after the closing quote.
    fn string(&mut self) -> Option<(usize, usize)> {
        self.expect(b'"')?;
        let start = self.i;
        if let Some(end) = self.short_plain_string(start) {
            return Some((start, end));
        }
        let mut j = start;
        let end = loop {
            let at = j + memchr::memchr2(b'"', b'\\', &self.b[j..])?;
            if self.b[at] == b'"' {
                break at;
            }
            j = match *self.b.get(at + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at + 2,
                b'u' => {
                    let hex = self.b.get(at + 2..at + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    at + 6
                }
                _ => return None,
            };
        };
        let text = &self.b[start..end];
        let (low, high) = low_high(text);
        if low < 0x20 {
            return None; // a control character: JSON has it escaped
        }
        self.tally.string_of(text, high < 0x80);
        self.i = end + 1;
        Some((start, end))
    }

    /// The common string, short and without escapes (most keys and many values), found by
    /// word instead of by `memchr2` and `low_high`, whose set-up costs more than such a
    /// string: its closing quote's offset, tallied and the cursor after it; `None` (nothing
    /// done) for a longer string, an escape or a control character, which `string` reads.
    fn short_plain_string(&mut self, start: usize) -> Option<usize> {
        const SHORT: usize = 32;
        let rest = self.b.get(start..)?;
        let n = stop(&rest[..rest.len().min(SHORT)])?;
        if rest[n] != b'"' {
            return None;
        }
        let text = &rest[..n];
        self.tally.string_of(text, text.is_ascii());
        self.i = start + n + 1;
        Some(start + n)
    }
}

/// The lowest and the highest byte of `s` (`(0xFF, 0)` when empty): below 0x20 is a
/// control character, which a JSON string may not hold unescaped; from 0x80 the text is not
/// ASCII. Lane by lane over 32-byte blocks, branch-free, so the compiler vectorises it.
fn low_high(s: &[u8]) -> (u8, u8) {
    let blocks = s.chunks_exact(32);
    let (mut low, mut high) = (u8::MAX, 0u8);
    for &c in blocks.remainder() {
        low = low.min(c);
        high = high.max(c);
    }
    if s.len() >= 32 {
        let mut lo = [u8::MAX; 32];
        let mut hi = [0u8; 32];
        for block in blocks {
            for ((l, h), &c) in lo.iter_mut().zip(hi.iter_mut()).zip(block) {
                *l = (*l).min(c);
                *h = (*h).max(c);
            }
        }
        low = low.min(lo.into_iter().fold(u8::MAX, u8::min));
        high = high.max(hi.into_iter().fold(0, u8::max));
    }
    (low, high)
}

#[cfg(test)]
#[path = "tests/scan.rs"]
pub(crate) mod tests;
