//! Byte-preserving edits of a JSON body, by the spans one parse found: where a value lies
//! (`span_of`), replacing it (`splice`) and inserting a member first (`insert_first`).
//! Everything outside the edited span is kept byte for byte (R1.3).

use bytes::Bytes;
use serde_json::value::RawValue;

/// Byte range of `raw` within `body` (`raw` was borrowed from `body` by one parse).
pub fn span_of(body: &[u8], raw: &RawValue) -> (usize, usize) {
    span_of_str(body, raw.get())
}

/// Byte range of `raw` within `body` (`raw` is a slice of `body`).
pub fn span_of_str(body: &[u8], raw: &str) -> (usize, usize) {
    let start = raw.as_ptr() as usize - body.as_ptr() as usize;
    (start, start + raw.len())
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

/// One edit of a body: the byte span it replaces, and the bytes that replace it.
pub type Edit<'a> = ((usize, usize), &'a [u8]);

/// Replace the bytes of each span with its replacement, in one copy; the spans must not
/// overlap (in any order). Everything else is kept byte for byte.
pub fn splice_all(body: &Bytes, edits: &mut [Edit<'_>]) -> Bytes {
    edits.sort_unstable_by_key(|(span, _)| span.0);
    let grow: usize = edits.iter().map(|(_, r)| r.len()).sum();
    let cut: usize = edits.iter().map(|((s, e), _)| e.saturating_sub(*s)).sum();
    let mut out = Vec::with_capacity((body.len() + grow).saturating_sub(cut));
    let mut at = 0;
    for ((start, end), replacement) in edits.iter() {
        out.extend_from_slice(&body[at..*start]);
        out.extend_from_slice(replacement);
        at = *end;
    }
    out.extend_from_slice(&body[at..]);
    exact(out)
}

/// Replace the bytes of `span` with `replacement`; everything else is kept byte for byte.
pub fn splice(body: &Bytes, span: (usize, usize), replacement: &[u8]) -> Bytes {
    splice_all(body, &mut [(span, replacement)])
}

/// Insert `"name":value` as the first member of the top-level object.
pub fn insert_first(body: &Bytes, member: &str) -> Bytes {
    insert_first_bytes(body, member.as_bytes())
}

/// [`insert_first`] of a member given as bytes (e.g. written into a buffer on the stack).
pub fn insert_first_bytes(body: &Bytes, member: &[u8]) -> Bytes {
    let Some(open) = body.iter().position(|&c| c == b'{') else {
        return body.clone();
    };
    let rest_empty = body[open + 1..]
        .iter()
        .find(|c| !c.is_ascii_whitespace())
        .is_some_and(|&c| c == b'}');
    let comma: &[u8] = if rest_empty { b"" } else { b"," };
    let mut out = Vec::with_capacity(body.len() + member.len() + comma.len());
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(member);
    out.extend_from_slice(comma);
    out.extend_from_slice(&body[open + 1..]);
    exact(out)
}

/// A new body as `Bytes`. Built to its exact length, its buffer becomes the `Bytes` as is;
/// a spare capacity would cost `Bytes` a second allocation (its shared header).
fn exact(out: Vec<u8>) -> Bytes {
    debug_assert_eq!(out.len(), out.capacity());
    Bytes::from(out)
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
