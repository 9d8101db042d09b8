//! The quick first look at the commonest stream event, an OpenAI chat chunk: one byte pass
//! over the data (no serde visitor per value), for the shape nearly every event of a chat
//! stream has. It answers only when it is sure: anything it does not read the way
//! `serde_json` does (an escape other than the two-character ones, a top-level key of
//! another dialect, a value of an unusual type in a field it counts, nesting deeper than
//! `MAX_DEPTH`, anything that is not JSON) gives `None`, and the serde pass reads the event.
//! What it returns is what that pass returns: `peek_tests.rs` checks the two against each
//! other and against the tree reading, on generated and on damaged events.

use super::{Choices, EventPeek};

/// Nesting the skipper follows before it leaves the event to the serde pass.
const MAX_DEPTH: usize = 16;

/// Read a chat chunk; `None` when the serde pass must read `data`.
#[cfg(test)]
pub(super) fn read(data: &str) -> Option<EventPeek> {
    read_at(data, 0).map(|(peek, _)| peek)
}

/// Read a chat chunk from `start`: 0 for the whole data, else the end of an opening
/// (`read_at`'s second answer for an earlier chunk whose data began with the same bytes),
/// where the reader stands inside the top-level object after a comma and nothing it read
/// changed the peek. Also answers the opening of this data: the bytes up to the first member
/// the peek reads (`choices`, `usage`, `error`), when members it skips (`id`, `object`,
/// `created`, `model`, …) come before it; 0 when none do. `None` when the serde pass must
/// read `data`.
///
/// The reading of those bytes never depends on what follows them (each skipped member ends
/// at its comma), so a read from the opening's end answers what a read from 0 answers.
pub(super) fn read_at(data: &str, start: usize) -> Option<(EventPeek, usize)> {
    read_spans(data, start).map(|read| (read.peek, read.opening))
}

/// What `read_spans` found: `read_at`'s two answers, and where the one `content` string of
/// the chunk's choices' deltas lay (its quotes included) when there was exactly one.
pub(super) struct Read {
    pub peek: EventPeek,
    pub opening: usize,
    pub content: Option<(usize, usize)>,
    /// Where the value of the last top-level member lay (its quotes included) when it is a
    /// string the pass skips (OpenAI's per-chunk `obfuscation` padding).
    pub tail: Option<(usize, usize)>,
}

/// `read_at`, with the content string's place (`Opening`'s shapes are learnt from it).
pub(super) fn read_spans(data: &str, start: usize) -> Option<Read> {
    let mut r = Reader::at(data, start);
    if start == 0 {
        r.ws();
        r.eat(b'{')?;
        r.ws();
    }
    let mut peek = EventPeek {
        json: true,
        ..EventPeek::default()
    };
    let mut opening = None;
    let mut tail = None;
    let top = |r: &mut Reader<'_>, key: &[u8], at: usize| {
        tail = None;
        match key {
            b"choices" => peek.choices = Some(r.choices()?),
            b"usage" => peek.usage = r.skip_is_object(0)?,
            b"error" => {
                peek.error = true;
                r.skip(0)?;
            }
            // `message`, `response`, `delta`, `type`: another dialect's event.
            b"message" | b"response" | b"delta" | b"type" => return None,
            _ => {
                let value = r.i;
                r.skip(0)?;
                tail = (r.b.get(value) == Some(&b'"')).then_some((value, r.i));
                return Some(());
            }
        }
        opening.get_or_insert(at);
        Some(())
    };
    if start == 0 && r.eat(b'}').is_some() {
        // `{}`: no member.
    } else {
        r.member_list(start, top)?;
    }
    r.ws();
    if r.i != r.b.len() {
        return None;
    }
    peek.content_chars = peek.choices.map_or(0, |c| c.chars);
    Some(Read {
        peek,
        opening: opening.unwrap_or(0),
        content: r.content.filter(|_| r.contents == 1),
        tail,
    })
}

/// The JSON string whose opening quote is at `at`: its characters, as the pass counts them,
/// and the offset after its closing quote; `None` where the pass would decline it.
pub(super) fn string_at(data: &str, at: usize) -> Option<(u64, usize)> {
    let mut r = Reader::at(data, at);
    let chars = r.string()?;
    Some((chars, r.i))
}

/// What a choice's `delta` field says: blank or not, and its characters.
#[derive(Clone, Copy)]
struct Field {
    blank: bool,
    chars: u64,
}

const ABSENT: Field = Field {
    blank: true,
    chars: 0,
};

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    /// The last string `content` of a choice's delta (quotes included), and how many were
    /// read.
    content: Option<(usize, usize)>,
    contents: u32,
}

impl<'a> Reader<'a> {
    /// A reader of `data` with its cursor at `i`.
    fn at(data: &'a str, i: usize) -> Self {
        Reader {
            b: data.as_bytes(),
            i,
            content: None,
            contents: 0,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// JSON whitespace, as `serde_json` skips it.
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.i += 1;
        }
    }

    /// The members of an object whose `{` was read, up to its `}`: `f` reads each value.
    fn members(&mut self, mut f: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        self.member_list(0, |r, key, _| f(r, key))
    }

    /// Members from the cursor (whitespace, then the first one's key) up to the object's
    /// `}`: `f` reads each value, told where its member began after a comma (`first` for the
    /// first member read here).
    fn member_list(
        &mut self,
        first: usize,
        mut f: impl FnMut(&mut Self, &'a [u8], usize) -> Option<()>,
    ) -> Option<()> {
        let mut at = first;
        loop {
            self.ws();
            let key = self.key()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            f(self, key, at)?;
            self.ws();
            if self.after_item(b'}')? {
                return Some(());
            }
            at = self.i;
        }
    }

    /// The elements of an array whose `[` was read, up to its `]`.
    fn elements(&mut self, mut f: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            f(self)?;
            self.ws();
            if self.after_item(b']')? {
                return Some(());
            }
        }
    }

    /// After a member or an element: `,` (more follow, `false`) or `close` (the container
    /// ends, `true`); anything else is not JSON.
    fn after_item(&mut self, close: u8) -> Option<bool> {
        let c = self.peek()?;
        self.i += 1;
        match c {
            b',' => Some(false),
            c if c == close => Some(true),
            _ => None,
        }
    }

    /// A key without escapes, as its bytes.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let run = self.plain_run()?;
        self.eat(b'"')?;
        Some(run)
    }

    /// A string: its characters once unescaped. Only the two-character escapes are read;
    /// `\u` (surrogates) and anything invalid go to the serde pass, and so does a control
    /// character, which serde refuses in a string.
    fn string(&mut self) -> Option<u64> {
        self.eat(b'"')?;
        let mut chars = 0u64;
        loop {
            let run = self.plain_run()?;
            // The data is UTF-8: a character is a byte that does not continue one.
            chars += run.iter().filter(|&&c| c & 0xC0 != 0x80).count() as u64;
            match self.escape()? {
                true => chars += 1,
                false => return Some(chars),
            }
        }
    }

    /// Past a string without counting it (a value the event's checks do not read).
    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            self.plain_run()?;
            if !self.escape()? {
                return Some(());
            }
        }
    }

    /// The bytes up to the next quote, backslash or control character, which the cursor
    /// is left on.
    fn plain_run(&mut self) -> Option<&'a [u8]> {
        let rest = self.b.get(self.i..)?;
        let n = stop(rest)?;
        self.i += n;
        rest.get(..n)
    }

    /// At a quote (the string ends: `false`, the cursor after it) or a two-character
    /// escape (`true`, the cursor after it); anything else leaves the string to serde.
    fn escape(&mut self) -> Option<bool> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                Some(false)
            }
            b'\\' => match self.b.get(self.i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    self.i += 2;
                    Some(true)
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// `literal` (`null`, `true`, `false`).
    fn literal(&mut self, literal: &[u8]) -> Option<()> {
        let end = self.i.checked_add(literal.len())?;
        (self.b.get(self.i..end)? == literal).then(|| self.i = end)
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - start
    }

    /// A number, with `serde_json`'s grammar (a lone leading zero, digits after `.` and `e`).
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.eat(b'.').is_some() && self.digits() == 0 {
            return None;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// Read past any value; `depth` is how deep it sits in skipped containers.
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.skip_is_object(depth).map(drop)
    }

    /// Read past any value: whether it was an object.
    fn skip_is_object(&mut self, depth: usize) -> Option<bool> {
        if depth >= MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => {
                self.i += 1;
                self.members(|r, _| r.skip(depth + 1))?;
                return Some(true);
            }
            b'[' => {
                self.i += 1;
                self.elements(|r| r.skip(depth + 1))?;
            }
            b'"' => self.skip_string()?,
            b'n' => self.literal(b"null")?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            _ => self.number()?,
        }
        Some(false)
    }

    /// `choices`: an array of choice objects.
    fn choices(&mut self) -> Option<Choices> {
        self.eat(b'[')?;
        let mut out = Choices {
            len: 0,
            finish: false,
            blank: true,
            chars: 0,
        };
        self.elements(|r| {
            let (finish, blank, chars) = r.choice()?;
            out.len += 1;
            out.finish |= finish;
            out.blank &= blank;
            out.chars += chars;
            Some(())
        })?;
        Some(out)
    }

    /// One choice object: (finishes, blank, characters). A repeated key replaces its value,
    /// as in the serde pass.
    fn choice(&mut self) -> Option<(bool, bool, u64)> {
        self.eat(b'{')?;
        let (mut finish, mut finish_null) = (false, true);
        let mut delta = ABSENT;
        let mut text = 0;
        self.members(|r, key| {
            match key {
                b"finish_reason" => {
                    (finish, finish_null) = match r.peek()? {
                        b'n' => r.literal(b"null").map(|()| (false, true))?,
                        b'"' => r.string().map(|_| (true, false))?,
                        _ => return None,
                    }
                }
                b"delta" => delta = r.delta()?,
                b"text" => text = r.field()?.chars,
                _ => r.skip(2)?,
            }
            Some(())
        })?;
        Some((finish, finish_null && delta.blank, delta.chars + text))
    }

    /// A string or null field: blank or not, and its characters.
    fn field(&mut self) -> Option<Field> {
        match self.peek()? {
            b'n' => self.literal(b"null").map(|()| ABSENT),
            b'"' => self.string().map(|chars| Field {
                blank: chars == 0,
                chars,
            }),
            _ => None,
        }
    }

    /// A choice's `delta` object (or null).
    fn delta(&mut self) -> Option<Field> {
        if self.peek()? == b'n' {
            return self.literal(b"null").map(|()| ABSENT);
        }
        self.eat(b'{')?;
        // content, reasoning_content, reasoning, refusal, tool_calls (null only)
        let mut fields = [ABSENT; 5];
        let mut present = false;
        self.members(|r, key| {
            match key {
                b"content" => {
                    let at = r.i;
                    fields[0] = r.field()?;
                    if r.b.get(at) == Some(&b'"') {
                        r.content = Some((at, r.i));
                        r.contents += 1;
                    }
                }
                b"reasoning_content" => fields[1] = r.field()?,
                b"reasoning" => fields[2] = r.field()?,
                b"refusal" => fields[3] = r.field()?,
                b"tool_calls" => fields[4] = r.literal(b"null").map(|()| ABSENT)?,
                b"function_call" | b"audio" => {
                    present = true;
                    r.skip(3)?;
                }
                _ => r.skip(3)?,
            }
            Some(())
        })?;
        Some(Field {
            blank: !present && fields.iter().all(|f| f.blank),
            chars: fields[0].chars + fields[1].chars,
        })
    }
}

/// The offset of the first quote, backslash or control character in `s` (`None`: none).
/// Eight bytes a step, in one word (strings and keys here are short, so a vectorised search
/// costs more to start than it saves): the classic has-zero-byte test, `(v - 0x01..) & !v &
/// 0x80..`, on the word xor a quote, xor a backslash, and (`- 0x20..`) on the word itself.
/// Its lowest set bit is exact (a false hit can only sit above a true one, where the
/// borrow came from), so the first stop is the lowest bit of the three tests together.
pub(in crate::wire) fn stop(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const QUOTES: u64 = ONES * b'"' as u64;
    const SLASHES: u64 = ONES * b'\\' as u64;
    const SPACES: u64 = ONES * 0x20;
    let mut words = s.chunks_exact(8);
    let mut at = 0;
    for w in &mut words {
        let x = u64::from_le_bytes(<[u8; 8]>::try_from(w).ok()?);
        let (q, b) = (x ^ QUOTES, x ^ SLASHES);
        let hits = ((q.wrapping_sub(ONES) & !q)
            | (b.wrapping_sub(ONES) & !b)
            | (x.wrapping_sub(SPACES) & !x))
            & HIGHS;
        if hits != 0 {
            return Some(at + (hits.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = words.remainder();
    let p = tail
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
    Some(at + p)
}
