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
    let Some(open) = body.iter().position(|&c| c == b'{') else {
        return body.clone();
    };
    let rest_empty = body[open + 1..]
        .iter()
        .find(|c| !c.is_ascii_whitespace())
        .is_some_and(|&c| c == b'}');
    let mut out = BytesMut::with_capacity(body.len() + member.len() + 1);
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(member.as_bytes());
    if !rest_empty {
        out.extend_from_slice(b",");
    }
    out.extend_from_slice(&body[open + 1..]);
    out.freeze()
}
