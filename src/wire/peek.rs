//! The first look at a stream event's JSON data: one borrowed pass that builds no tree and
//! allocates nothing, and answers what the relay asks of every event (is it JSON, does a
//! choice finish, is the chunk empty, the usage-only chunk, an `error` key, a usage report,
//! the characters of content). The whole tree (`Event::json`) is parsed only for the rare
//! events a `EventPeek` says need it: those with a usage report or an `error` key. The
//! commonest event, a chat chunk, is read quicker still, by a byte pass (`peek_fast.rs`),
//! and a chat stream's chunks from the end of the opening they all repeat (`Opening`) —
//! by their content string alone when they repeat everything else (`Shape`).
//!
//! Every answer is the one the tree-walking reading gives (`wire::dialect`,
//! `wire::usage_stream`); `peek_tests.rs` checks them against each other on every shape.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What one event's data says, read in one pass.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EventPeek {
    /// The data is JSON (of any type).
    pub json: bool,
    /// `choices` is an array: what its elements say.
    pub choices: Option<Choices>,
    /// A top-level `usage` that is an object.
    pub usage: bool,
    /// A `usage` object inside a top-level `message` or `response` (Anthropic's
    /// `message_start`, the Responses API's final events).
    pub nested_usage: bool,
    /// A top-level `error` key, whatever its value.
    pub error: bool,
    /// Characters of generated content: choices' deltas and texts, a top-level `delta`'s
    /// `text` / `partial_json` / `thinking`, and a string `delta` of a `*.delta` event.
    pub content_chars: u64,
}

/// What a `choices` array says.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Choices {
    pub len: usize,
    /// Some choice has a string `finish_reason`.
    pub finish: bool,
    /// Every choice carries nothing of the answer: no content, reasoning, tool call,
    /// refusal, function call, audio or finish reason.
    pub blank: bool,
    /// Characters of content in the choices' deltas and texts.
    pub chars: u64,
}

impl EventPeek {
    /// Read `data`; `EventPeek::default()` (not JSON) when it is not JSON. A chat chunk of
    /// the common shape is read by `peek_fast`'s byte pass, anything else by serde.
    pub fn read(data: &str) -> EventPeek {
        match fast::read_at(data, 0) {
            Some((peek, _)) => peek,
            None => EventPeek::read_serde(data),
        }
    }

    /// Read `data` with the serde visitors below: every event the quick pass leaves.
    fn read_serde(data: &str) -> EventPeek {
        let mut de = serde_json::Deserializer::from_str(data);
        de.deserialize_any(TopVisitor)
            .and_then(|peek| de.end().map(|()| peek))
            .unwrap_or_default()
    }
}

/// A chat stream's memory of its chunks' opening: the bytes before the first member the peek
/// reads, which every chunk of one stream repeats (`{"id":"chatcmpl-…","object":
/// "chat.completion.chunk","created":…,"model":"…",` — OpenAI, DeepSeek, vLLM and this
/// gateway's own translations all put them first). A chunk that begins with the remembered
/// bytes is read from where they end (`peek_fast::read_at`): the same answer as reading it
/// whole, for the cost of comparing them. Held by the stream's `Framer`.
#[derive(Debug, Default)]
pub struct Opening {
    bytes: Vec<u8>,
    /// The shape of the stream's content chunks after the opening (`Shape`), once learnt.
    shape: Option<Shape>,
    /// Shapes learnt so far: a stream whose chunks keep changing shape stops paying for it.
    learnt: u8,
}

/// At most this many shapes are learnt per stream (a chat stream learns one, from its first
/// content chunk: the `role` chunk before it teaches the opening).
const MAX_SHAPES: u8 = 4;

impl Opening {
    /// `EventPeek::read(data)`, from the remembered opening when `data` begins with it, and
    /// by the remembered shape when the rest repeats it; a chunk read whole teaches its own
    /// opening, a chunk with one content string read through the opening its shape.
    pub fn read(&mut self, data: &str) -> EventPeek {
        let b = data.as_bytes();
        let n = self.bytes.len();
        let start = match n > 0 && b.len() > n && b.starts_with(&self.bytes) {
            true => n,
            false => 0,
        };
        if let Some(peek) = self.shape.as_ref().and_then(|s| s.read(data, start)) {
            return peek;
        }
        // Declined from the opening's end means declined from the start: serde reads it.
        let Some(read) = fast::read_spans(data, start) else {
            return EventPeek::read_serde(data);
        };
        let opening = read.opening;
        if let Some(bytes) = b.get(..opening).filter(|o| start == 0 && !o.is_empty()) {
            self.bytes.clear();
            self.bytes.extend_from_slice(bytes);
            self.shape = None;
        }
        // A shape is learnt from a chunk read through the opening (the first chunk, which
        // teaches the opening, is a chat stream's `role` chunk, whose shape no other has).
        if let (Some(content), true) = (read.content, start > 0 && self.learnt < MAX_SHAPES) {
            self.learnt += 1;
            // A chunk that teaches nothing keeps what was learnt: a shape stays true of the
            // chunks that repeat it.
            if let Some(shape) = Shape::learn(data, start, content, read.tail) {
                self.shape = Some(shape);
            }
        }
        read.peek
    }
}

/// A chat stream's content chunks repeat every byte after their opening but the content
/// string (`"choices":[{"index":0,"delta":{"content":"` … `"},"finish_reason":null}]}`) and,
/// on OpenAI, the string of a last member the peek skips (`"obfuscation":"…"`, random
/// padding): the bytes around them, and the peek of the chunk with those strings empty. A
/// chunk that repeats those bytes is read by reading only its strings: the peek depends on
/// the content string through its characters alone (they add to the choices' and the
/// content's characters, and any make the choice not blank) and on a skipped member's string
/// not at all, which `learn` checks on two pairs of strings before trusting it.
#[derive(Debug)]
struct Shape {
    /// The bytes before the content string (from the opening's end), between it and the
    /// tail string, and after the last string, in one buffer.
    around: Vec<u8>,
    /// Where the bytes after the content string begin in `around`.
    split: usize,
    /// Where the bytes after the tail string begin in `around`, when the shape has one.
    tail: Option<usize>,
    empty: EventPeek,
}

impl Shape {
    /// The shape of `data` around its content string at `content` and, when it follows,
    /// a skipped last member's string at `tail` (quotes included), after an opening of `end`
    /// bytes; `None` when the chunk does not read as a shape must.
    fn learn(
        data: &str,
        end: usize,
        content: (usize, usize),
        tail: Option<(usize, usize)>,
    ) -> Option<Shape> {
        let tail = tail.filter(|t| t.0 >= content.1);
        let head = data.get(..content.0)?;
        let (between, after) = match tail {
            Some(t) => (data.get(content.1..t.0)?, data.get(t.1..)?),
            None => (data.get(content.1..)?, ""),
        };
        let prefix = head.as_bytes().get(end..)?;
        let mut around = Vec::with_capacity(prefix.len() + between.len() + after.len());
        for part in [prefix, between.as_bytes(), after.as_bytes()] {
            around.extend_from_slice(part);
        }
        // The chunk with empty strings, then with one character in each, read from the
        // opening's end as the chunks of the shape will be.
        let with = |text: &str| {
            let mut chunk = String::with_capacity(data.len() + 6);
            chunk.push_str(head);
            // Each string, then the bytes that follow it: the content string, and the tail
            // string when the shape has one.
            for part in [between, after]
                .iter()
                .take(1 + usize::from(tail.is_some()))
            {
                chunk.push('"');
                chunk.push_str(text);
                chunk.push('"');
                chunk.push_str(part);
            }
            fast::read_at(&chunk, end).map(|(peek, _)| peek)
        };
        let shape = Shape {
            around,
            split: prefix.len(),
            tail: tail.map(|_| prefix.len() + between.len()),
            empty: with("")?,
        };
        (with("x")? == shape.predict(1)).then_some(shape)
    }

    /// The peek of a chunk of this shape whose content string has `chars` characters.
    fn predict(&self, chars: u64) -> EventPeek {
        let mut peek = self.empty;
        if chars > 0 {
            if let Some(c) = peek.choices.as_mut() {
                c.blank = false;
                c.chars += chars;
            }
            peek.content_chars += chars;
        }
        peek
    }

    /// The peek of `data` read from `start` (its opening's end), when the rest repeats the
    /// shape around strings the quick pass reads.
    fn read(&self, data: &str, start: usize) -> Option<EventPeek> {
        let b = data.as_bytes();
        let prefix = &self.around[..self.split];
        if start == 0 || !b.get(start..)?.starts_with(prefix) {
            return None;
        }
        let (chars, mut at) = fast::string_at(data, start + prefix.len())?;
        let rest = match self.tail {
            Some(t) => {
                let between = &self.around[self.split..t];
                if !b.get(at..)?.starts_with(between) {
                    return None;
                }
                at = fast::string_at(data, at + between.len())?.1;
                &self.around[t..]
            }
            None => &self.around[self.split..],
        };
        (b.get(at..)? == rest).then(|| self.predict(chars))
    }
}

/// Visitor methods for values whose type says nothing to the visitor: each gives `$value`
/// (sequences and maps are read past first). `expecting` is the one message they all share.
macro_rules! gives {
    ($($kind:ident $(: $value:expr)?);+ $(;)?) => {
        $(gives!(@one $kind $(: $value)?);)+
    };
    (@one expecting) => {
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any value")
        }
    };
    (@one scalars: $value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@one unit: $value:expr) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@one str: $value:expr) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
    (@one seq: $value:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            drain_seq(seq)?;
            Ok($value)
        }
    };
    (@one map: $value:expr) => {
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            drain_map(map)?;
            Ok($value)
        }
    };
}

/// Read past the rest of a sequence.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<usize, A::Error> {
    let mut n = 0;
    while seq.next_element::<IgnoredAny>()?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// Read past the rest of a map.
fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A map key, borrowed: which of the names looked for it is.
struct Key<'k>(&'k [&'static str]);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    /// The index of the name in the list, `None` for any other key.
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|name| *name == key))
    }
}

/// Deserialize the value of the entry whose key was just read, with `visitor`, through
/// `deserialize_any`.
struct Any<V>(V);

impl<'de, V: Visitor<'de>> DeserializeSeed<'de> for Any<V> {
    type Value = V::Value;
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self.0)
    }
}

/// A field read for its shape and characters: as the tree reading tells "blank" (null, an
/// empty string, an empty array, or absent) from "something".
#[derive(Debug, Default, Clone, Copy)]
struct Field {
    /// Null, absent, an empty string or an empty array.
    blank: bool,
    /// Characters when it is a string.
    chars: u64,
}

impl Field {
    const ABSENT: Field = Field {
        blank: true,
        chars: 0,
    };
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field;
    gives!(expecting; scalars: Field::default());
    // Null reads as absent.
    gives!(unit: Field::ABSENT);
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Field, E> {
        Ok(Field {
            blank: text.is_empty(),
            chars: text.chars().count() as u64,
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field, A::Error> {
        Ok(Field {
            blank: drain_seq(seq)? == 0,
            chars: 0,
        })
    }
    gives!(map: Field::default());
}

/// `usage` read for one thing: is it an object.
struct IsObject;

impl<'de> Visitor<'de> for IsObject {
    type Value = bool;
    gives!(expecting; scalars: Default::default(); unit: Default::default(); str: false; seq: false; map: true);
}

/// A `message` or `response` object read for one thing: does it carry a `usage` object.
struct HasUsage;

impl<'de> Visitor<'de> for HasUsage {
    type Value = bool;
    gives!(expecting; scalars: Default::default(); unit: Default::default(); str: false; seq: false);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut usage = false;
        while let Some(key) = map.next_key_seed(Key(&["usage"]))? {
            match key {
                Some(_) => usage = map.next_value_seed(Any(IsObject))?,
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(usage)
    }
}

/// A `{name, arguments}` function of a tool call, or a tool call holding one: the
/// characters of its name and arguments.
struct FunctionChars {
    /// Looking at a tool call (its `function` holds the characters), not the function.
    call: bool,
}

impl<'de> Visitor<'de> for FunctionChars {
    type Value = u64;
    gives!(expecting; scalars: Default::default(); unit: Default::default(); str: 0; seq: 0);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        // Per key, so a repeated key replaces its value as in the tree.
        let mut chars = [0u64; 2];
        let keys: &[&str] = if self.call {
            &["function"]
        } else {
            &["name", "arguments"]
        };
        while let Some(key) = map.next_key_seed(Key(keys))? {
            match (key, self.call) {
                (None, _) => drop(map.next_value::<IgnoredAny>()?),
                (Some(_), true) => {
                    chars[0] = map.next_value_seed(Any(FunctionChars { call: false }))?;
                }
                (Some(i), false) => chars[i] = map.next_value_seed(Any(FieldVisitor))?.chars,
            }
        }
        Ok(chars[0] + chars[1])
    }
}

/// `tool_calls`: blank or not, and the characters of every call's function.
struct ToolCalls;

impl<'de> Visitor<'de> for ToolCalls {
    type Value = Field;
    gives!(expecting);
    fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Field, E> {
        FieldVisitor.visit_bool(flag)
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Field, E> {
        FieldVisitor.visit_i64(n)
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Field, E> {
        FieldVisitor.visit_u64(n)
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Field, E> {
        FieldVisitor.visit_f64(n)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Field, E> {
        FieldVisitor.visit_unit()
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Field, E> {
        FieldVisitor
            .visit_str(text)
            .map(|field| Field { chars: 0, ..field })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field, A::Error> {
        let (mut len, mut chars) = (0, 0);
        while let Some(n) = seq.next_element_seed(Any(FunctionChars { call: true }))? {
            len += 1;
            chars += n;
        }
        Ok(Field {
            blank: len == 0,
            chars,
        })
    }
    gives!(map: Field::default());
}

/// One choice's `delta`: blank or not, and its characters of content.
#[derive(Debug, Clone, Copy)]
struct Delta {
    blank: bool,
    chars: u64,
}

impl Default for Delta {
    /// A delta that is absent or not an object: every field reads as absent.
    fn default() -> Self {
        Delta {
            blank: true,
            chars: 0,
        }
    }
}

const DELTA_KEYS: &[&str] = &[
    "content",
    "reasoning_content",
    "reasoning",
    "refusal",
    "tool_calls",
    "function_call",
    "audio",
];

struct DeltaVisitor;

impl<'de> Visitor<'de> for DeltaVisitor {
    type Value = Delta;
    gives!(expecting; scalars: Default::default(); unit: Default::default(); str: Delta::default(); seq: Delta::default());
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Delta, A::Error> {
        // Per key, so a repeated key replaces its value as in the tree.
        let mut fields = [Field::ABSENT; 5];
        let mut present = false;
        while let Some(key) = map.next_key_seed(Key(DELTA_KEYS))? {
            match key {
                Some(i @ 0..=3) => fields[i] = map.next_value_seed(Any(FieldVisitor))?,
                Some(4) => fields[4] = map.next_value_seed(Any(ToolCalls))?,
                Some(_) => {
                    present = true; // function_call, audio: present at all is content
                    map.next_value::<IgnoredAny>()?;
                }
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        // Counted as the tree reading counts: content, reasoning_content, tool calls.
        let chars = fields[0].chars + fields[1].chars + fields[4].chars;
        Ok(Delta {
            blank: !present && fields.iter().all(|f| f.blank),
            chars,
        })
    }
}

/// One element of `choices`.
#[derive(Debug, Default, Clone, Copy)]
struct Choice {
    finish: bool,
    blank: bool,
    chars: u64,
}

struct ChoiceVisitor;

impl<'de> Visitor<'de> for ChoiceVisitor {
    type Value = Choice;
    gives!(expecting; scalars: Choice::blank(); unit: Choice::blank(); str: Choice::blank(); seq: Choice::blank());
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Choice, A::Error> {
        let (mut finish, mut finish_null) = (false, true);
        let mut delta = Delta::default();
        let mut text = 0;
        while let Some(key) = map.next_key_seed(Key(&["finish_reason", "delta", "text"]))? {
            match key {
                Some(0) => (finish, finish_null) = map.next_value_seed(Any(FinishReason))?,
                Some(1) => delta = map.next_value_seed(Any(DeltaVisitor))?,
                Some(_) => text = map.next_value_seed(Any(FieldVisitor))?.chars,
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(Choice {
            finish,
            blank: finish_null && delta.blank,
            chars: delta.chars + text,
        })
    }
}

impl Choice {
    /// A choice that is not an object: nothing in it, as the tree reads it.
    fn blank() -> Choice {
        Choice {
            finish: false,
            blank: true,
            chars: 0,
        }
    }
}

/// `finish_reason`: (a string, null).
struct FinishReason;

impl<'de> Visitor<'de> for FinishReason {
    type Value = (bool, bool);
    gives!(expecting; scalars: (false, false); unit: (false, true); str: (true, false); seq: (false, false); map: (false, false));
}

/// `choices`: an array, or `None` for any other value.
struct ChoicesVisitor;

impl<'de> Visitor<'de> for ChoicesVisitor {
    type Value = Option<Choices>;
    gives!(expecting; scalars: Default::default(); unit: Default::default(); str: None; map: None);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Choices {
            len: 0,
            finish: false,
            blank: true,
            chars: 0,
        };
        while let Some(choice) = seq.next_element_seed(Any(ChoiceVisitor))? {
            out.len += 1;
            out.finish |= choice.finish;
            out.blank &= choice.blank;
            out.chars += choice.chars;
        }
        Ok(Some(out))
    }
}

/// A top-level `delta`: the characters of its `text`, `partial_json` and `thinking` when it
/// is an object, or of itself when it is a string (counted for `*.delta` events only).
#[derive(Debug, Default, Clone, Copy)]
struct TopDelta {
    fields: u64,
    string: u64,
}

struct TopDeltaVisitor;

impl<'de> Visitor<'de> for TopDeltaVisitor {
    type Value = TopDelta;
    gives!(expecting; scalars: Default::default(); unit: Default::default());
    fn visit_str<E: de::Error>(self, text: &str) -> Result<TopDelta, E> {
        Ok(TopDelta {
            fields: 0,
            string: text.chars().count() as u64,
        })
    }
    gives!(seq: TopDelta::default());
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopDelta, A::Error> {
        let mut chars = [0u64; 3];
        while let Some(key) = map.next_key_seed(Key(&["text", "partial_json", "thinking"]))? {
            match key {
                Some(i) => chars[i] = map.next_value_seed(Any(FieldVisitor))?.chars,
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(TopDelta {
            fields: chars.iter().sum(),
            string: 0,
        })
    }
}

/// A top-level `type`: does it end in `.delta`.
struct DeltaType;

impl<'de> Visitor<'de> for DeltaType {
    type Value = bool;
    gives!(expecting; scalars: Default::default(); unit: Default::default());
    fn visit_str<E: de::Error>(self, kind: &str) -> Result<bool, E> {
        Ok(kind.ends_with(".delta"))
    }
    gives!(seq: false; map: false);
}

const TOP_KEYS: &[&str] = &[
    "choices", "usage", "error", "message", "response", "delta", "type",
];

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = EventPeek;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    gives!(scalars: EventPeek::json_only(); unit: EventPeek::json_only(); str: EventPeek::json_only(); seq: EventPeek::json_only());
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EventPeek, A::Error> {
        let mut peek = EventPeek::json_only();
        let (mut delta, mut delta_type) = (TopDelta::default(), false);
        let (mut message_usage, mut response_usage) = (false, false);
        while let Some(key) = map.next_key_seed(Key(TOP_KEYS))? {
            match key {
                Some(0) => peek.choices = map.next_value_seed(Any(ChoicesVisitor))?,
                Some(1) => peek.usage = map.next_value_seed(Any(IsObject))?,
                Some(2) => {
                    peek.error = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Some(3) => message_usage = map.next_value_seed(Any(HasUsage))?,
                Some(4) => response_usage = map.next_value_seed(Any(HasUsage))?,
                Some(5) => delta = map.next_value_seed(Any(TopDeltaVisitor))?,
                Some(_) => delta_type = map.next_value_seed(Any(DeltaType))?,
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        peek.nested_usage = message_usage || response_usage;
        let choice_chars = peek.choices.map_or(0, |c| c.chars);
        let string_delta = if delta_type { delta.string } else { 0 };
        peek.content_chars = choice_chars + delta.fields + string_delta;
        Ok(peek)
    }
}

impl EventPeek {
    fn json_only() -> EventPeek {
        EventPeek {
            json: true,
            ..EventPeek::default()
        }
    }
}

#[path = "peek_fast.rs"]
pub(super) mod fast;

#[cfg(test)]
#[path = "peek_tests.rs"]
mod tests;
