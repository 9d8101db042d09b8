//! Request-path hygiene (R14.3, B-path-hygiene): a path
//! with a dot-segment, an encoded separator or a malformed escape is refused with 400 before
//! routing; every other path is normalised once, and that one string is what the family is
//! classified from, what routes are looked up by, and what the upstream receives.
//!
//! Normalisation (RFC 3986 §6.2.2): percent-encoded unreserved characters are decoded
//! (`%63hat` → `chat`), other escapes are kept with upper-case hex, and empty segments
//! (`//`, a trailing `/`) are dropped. Refused: `.` and `..` segments in any encoding
//! (`%2e%2e`, `.%2E`), encoded `/` and `\` (`%2f`, `%5c`) and their double encodings
//! (`%252e`, `%252f`), a raw `\`, control characters, and `%` not followed by two hex digits.

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::{Arc, LazyLock};

/// Why a path was refused; the message is shown to the client.
pub type PathError = &'static str;

/// The normalised form of `raw` (the path part of the request target, without the query),
/// shared: the request's context, its upstream request and its log record hold one string.
/// The API's own paths (`/v1/chat/completions`, ...) come already normal and are one string
/// for the whole process ([`shared`]), so the common request allocates nothing here.
pub fn normalise(raw: &str) -> Result<Arc<str>, PathError> {
    if !raw.starts_with('/') {
        return Ok(raw.into());
    }
    if is_normal(raw) {
        return Ok(shared(raw));
    }
    rebuilt(raw).map(|out| shared(&out))
}

/// `raw` (starting with `/`) rebuilt segment by segment: each decoded or refused, empty
/// ones dropped.
fn rebuilt(raw: &str) -> Result<String, PathError> {
    let mut out = String::with_capacity(raw.len());
    for seg in raw.split('/').filter(|s| !s.is_empty()) {
        let seg = segment(seg)?;
        if is_dot(&seg) {
            return Err("the path contains a dot-segment (`.` or `..`)");
        }
        out.push('/');
        out.push_str(&seg);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// `raw` (starting with `/`) is its own normal form: no empty segment (`//`, a trailing
/// `/` unless it is all), no dot-segment, no escape, backslash or control character.
fn is_normal(raw: &str) -> bool {
    raw == "/"
        || (plain(raw.as_bytes())
            && raw[1..]
                .split('/')
                .all(|seg| !seg.is_empty() && !is_dot(seg)))
}

/// No escape, backslash or control character: nothing to decode or refuse.
fn plain(bytes: &[u8]) -> bool {
    !bytes
        .iter()
        .any(|&c| c == b'%' || c == b'\\' || c.is_ascii_control())
}

/// A dot-segment (`.` or `..`).
fn is_dot(seg: &str) -> bool {
    seg == "." || seg == ".."
}

/// The API paths clients send most, each one string for the process.
const COMMON: [&str; 8] = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1/responses",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/models",
    "/v1/messages/count_tokens",
    "/v1/responses/input_tokens",
];

/// `path` as a shared string: one of [`COMMON`] without an allocation, any other copied.
pub fn shared(path: &str) -> Arc<str> {
    static STRINGS: LazyLock<[Arc<str>; COMMON.len()]> =
        LazyLock::new(|| COMMON.map(Arc::<str>::from));
    match COMMON.iter().position(|c| *c == path) {
        Some(i) => STRINGS[i].clone(),
        None => path.into(),
    }
}

/// One segment: decoded where it is safe to, refused where it is not. A segment with no
/// escape, backslash or control character is already normal and is borrowed (the common
/// case: no allocation per segment).
fn segment(seg: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = seg.as_bytes();
    if plain(bytes) {
        return Ok(Cow::Borrowed(seg));
    }
    let mut out = String::with_capacity(seg.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let byte = hex_pair(bytes, i + 1).ok_or("the path has a malformed %-escape")?;
                if byte == b'%' && hex_pair(bytes, i + 3).is_some_and(dangerous) {
                    return Err("the path contains a double-encoded `.`, `/` or `\\`");
                }
                if byte == b'/' || byte == b'\\' {
                    return Err("the path contains an encoded `/` or `\\` (`%2f`, `%5c`)");
                }
                if byte.is_ascii_control() {
                    return Err("the path contains an encoded control character");
                }
                if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                    out.push(byte as char);
                } else {
                    let _ = write!(out, "%{byte:02X}");
                }
                i += 3;
            }
            b'\\' => return Err("the path contains a `\\`"),
            c if c.is_ascii_control() => return Err("the path contains a control character"),
            _ => {
                // Multi-byte UTF-8 cannot appear in a parsed request target; copy as is.
                let start = i;
                i += 1;
                while i < bytes.len()
                    && !matches!(bytes[i], b'%' | b'\\')
                    && !bytes[i].is_ascii_control()
                {
                    i += 1;
                }
                out.push_str(&seg[start..i]);
                continue;
            }
        }
    }
    Ok(Cow::Owned(out))
}

fn dangerous(byte: u8) -> bool {
    matches!(byte, b'.' | b'/' | b'\\')
}

fn hex_pair(b: &[u8], at: usize) -> Option<u8> {
    let hi = (*b.get(at)? as char).to_digit(16)?;
    let lo = (*b.get(at + 1)? as char).to_digit(16)?;
    Some((hi * 16 + lo) as u8)
}

/// The model id of `GET /v1/models/{id}`, fully decoded (an id may hold `/`, which SDKs send
/// as `%2F`). This path is answered by the gateway and never forwarded, so decoding it whole
/// cannot reach an upstream. `None` when the escape is malformed or the id is not UTF-8.
pub fn model_id(rest: &str) -> Option<String> {
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(hex_pair(bytes, i + 1)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_shapes() {
        for p in [
            "/v1/../admin",
            "/v1/chat/..",
            "/v1/./chat/completions",
            "/v1/%2e%2e/assistants",
            "/v1/%2E%2E/assistants",
            "/v1/.%2e/assistants",
            "/v1/%2e/chat/completions",
            "/v1/chat%2fcompletions",
            "/v1/chat%2Fcompletions",
            "/v1/a%5cb",
            "/v1/a\\b",
            "/v1/%252e%252e/x",
            "/v1/a%252fb",
            "/v1/a%2",
            "/v1/a%zz",
            "/v1/a%00b",
            "/v1/a%0ab",
        ] {
            assert!(normalise(p).is_err(), "{p} was accepted");
        }
    }

    #[test]
    fn normal_forms() {
        for (raw, want) in [
            ("/v1/chat/completions", "/v1/chat/completions"),
            ("/v1//chat/completions", "/v1/chat/completions"),
            ("/v1/chat/completions/", "/v1/chat/completions"),
            ("/v1/%63hat/completions", "/v1/chat/completions"),
            ("/v1/files/a%20b", "/v1/files/a%20b"),
            ("/v1/files/a%3ab", "/v1/files/a%3Ab"),
            ("/v1/files/v1.2..3", "/v1/files/v1.2..3"),
            ("/v1/files/a%2eb", "/v1/files/a.b"),
            ("/", "/"),
            ("//", "/"),
            ("*", "*"),
        ] {
            assert_eq!(normalise(raw).as_deref(), Ok(want), "{raw}");
        }
    }

    /// The fast path (a path already normal is taken as is) agrees with the full
    /// normalisation on every shape it accepts, and refuses nothing the full one accepts.
    #[test]
    fn the_fast_path_agrees_with_the_full_one() {
        for raw in [
            "/",
            "/v1/chat/completions",
            "/v1//chat",
            "/v1/chat/",
            "/v1/./x",
            "/v1/../x",
            "/v1/%63hat",
            "/v1/a.b/c",
            "/v1/.well-known",
            "/v1/..x",
            "/a",
            "//",
        ] {
            let full = rebuilt(raw);
            if is_normal(raw) {
                assert_eq!(full.as_deref(), Ok(raw), "{raw} is not its own normal form");
            }
            assert_eq!(normalise(raw).is_err(), full.is_err(), "{raw}");
        }
    }

    /// The API's own paths are one string for the process (no allocation per request);
    /// another path is its own copy with the same text.
    #[test]
    fn common_paths_are_shared() {
        let a = normalise("/v1/chat/completions").unwrap();
        let b = normalise("/v1/chat/completions").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = normalise("/v1//chat/completions/").unwrap();
        assert!(
            Arc::ptr_eq(&a, &c),
            "a normalised common path is the shared one"
        );
        let d = shared("/v1/files");
        assert_eq!(&*d, "/v1/files");
        assert!(!Arc::ptr_eq(&d, &shared("/v1/files")));
    }

    #[test]
    fn model_ids_decode_whole() {
        assert_eq!(
            model_id("meta-llama%2FLlama-3").as_deref(),
            Some("meta-llama/Llama-3")
        );
        assert_eq!(model_id("gpt-5.4").as_deref(), Some("gpt-5.4"));
        assert_eq!(model_id("a%2"), None);
        assert_eq!(model_id(""), None);
        assert_eq!(model_id("%ff"), None);
    }
}
