//! Byte-preserving edits of a JSON body, by the spans one parse found: where a value lies
//! (`span_of`), replacing it (`splice`) and inserting a member first (`insert_first`).
//! Everything outside the edited span is kept byte for byte (R1.3).

use bytes::{Bytes, BytesMut};
use serde_json::value::RawValue;

/// Byte range of `raw` within `body` (`raw` was borrowed from `body` by one parse).
pub fn span_of(body: &[u8], raw: &RawValue) -> (usize, usize) {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    (start, start + raw.get().len())
}

/// A member's value read as raw JSON, `null` included (a plain `Option<&RawValue>` reads a
/// `null` as absent); for `#[serde(default, deserialize_with = "json::raw_or_null")]`.
pub fn raw_or_null<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(de).map(Some)
}

/// The byte range of the key `"name"` (quotes included) written plainly just before the
/// member value starting at `value_start` (`"name" : value`); `None` when the key is not
/// written so (escaped).
pub fn key_before(body: &[u8], value_start: usize, name: &str) -> Option<(usize, usize)> {
    let before = body[..value_start]
        .trim_ascii_end()
        .strip_suffix(b":")?
        .trim_ascii_end();
    let key = before.strip_suffix(b"\"")?.strip_suffix(name.as_bytes())?;
    let start = key.strip_suffix(b"\"")?.len();
    Some((start, before.len()))
}

/// Replace the bytes of each span with its replacement, in one copy; the spans must not
/// overlap (in any order). Everything else is kept byte for byte.
pub fn splice_all(body: &Bytes, edits: &mut [((usize, usize), &[u8])]) -> Bytes {
    edits.sort_unstable_by_key(|(span, _)| span.0);
    let grow: usize = edits.iter().map(|(_, r)| r.len()).sum();
    let mut out = BytesMut::with_capacity(body.len() + grow);
    let mut at = 0;
    for ((start, end), replacement) in edits.iter() {
        out.extend_from_slice(&body[at..*start]);
        out.extend_from_slice(replacement);
        at = *end;
    }
    out.extend_from_slice(&body[at..]);
    out.freeze()
}

/// Replace the bytes of `span` with `replacement`; everything else is kept byte for byte.
pub fn splice(body: &Bytes, span: (usize, usize), replacement: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(body.len() + replacement.len());
    out.extend_from_slice(&body[..span.0]);
    out.extend_from_slice(replacement);
    out.extend_from_slice(&body[span.1..]);
    out.freeze()
}

/// Insert `"name":value` as the first member of the top-level object.
pub fn insert_first(body: &Bytes, member: &str) -> Bytes {
    insert_first_with(body, member.len(), |out| {
        out.extend_from_slice(member.as_bytes())
    })
}

/// [`insert_first`] of the member `write` writes straight into the new body (no string of
/// its own); the body is sized for a member of about `len` bytes.
pub fn insert_first_with(body: &Bytes, len: usize, write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let Some(open) = body.iter().position(|&c| c == b'{') else {
        return body.clone();
    };
    let rest_empty = body[open + 1..]
        .iter()
        .find(|c| !c.is_ascii_whitespace())
        .is_some_and(|&c| c == b'}');
    let mut out = BytesMut::with_capacity(body.len() + len + 1);
    out.extend_from_slice(&body[..=open]);
    write(&mut out);
    if !rest_empty {
        out.extend_from_slice(b",");
    }
    out.extend_from_slice(&body[open + 1..]);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_all_edits_in_any_order_and_keeps_the_rest() {
        let body = Bytes::from_static(br#"{"a":1, "bb" : 2,"c":3}"#);
        let a = key_before(&body, 5, "a").unwrap();
        assert_eq!(&body[a.0..a.1], br#""a""#);
        let bb = key_before(&body, 15, "bb").unwrap();
        assert_eq!(&body[bb.0..bb.1], br#""bb""#);
        assert_eq!(key_before(&body, 15, "b"), None);
        let out = splice_all(&body, &mut [(bb, b"\"longer\""), ((5, 6), b"10"), (a, b"")]);
        assert_eq!(&out[..], br#"{:10, "longer" : 2,"c":3}"#);
        assert_eq!(splice_all(&body, &mut []), body);
    }
}
