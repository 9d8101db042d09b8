//! Typed, allocation-free reading of `usage` from a complete upstream body: every other
//! field is skipped without being built, unlike a full `serde_json::Value` (R11, issue 9).

use serde::Deserialize;

use crate::wire::lenient::Lenient;
use crate::wire::usage::{Raw, Usage};

#[derive(Deserialize, Default)]
struct Details {
    #[serde(default)]
    cached_tokens: Lenient,
}

/// The fields `Usage::absorb` reads, for every dialect.
#[derive(Deserialize, Default)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Lenient,
    #[serde(default)]
    input_tokens: Lenient,
    #[serde(default)]
    completion_tokens: Lenient,
    #[serde(default)]
    output_tokens: Lenient,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
    #[serde(default)]
    input_tokens_details: Option<Details>,
    #[serde(default)]
    cache_read_input_tokens: Lenient,
    #[serde(default)]
    cache_creation_input_tokens: Lenient,
}

#[derive(Deserialize)]
struct Inner {
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    response: Option<Inner>,
}

/// `usage` (or `response.usage`) of a complete body; `None` when there is none or the body
/// is not a JSON object.
pub fn from_body(body: &[u8]) -> Option<Usage> {
    // Most bodies that carry usage say so near their end; none without the key at all.
    memchr::memmem::rfind(body, b"\"usage\"")?;
    let b: Body = serde_json::from_slice(body).ok()?;
    let u = b.usage.or_else(|| b.response.and_then(|r| r.usage))?;
    let cached = |d: &Option<Details>| d.as_ref().and_then(|d| d.cached_tokens.0);
    let mut out = Usage::default();
    out.fold(Raw {
        prompt: u.prompt_tokens.0,
        input: u.input_tokens.0,
        completion: u.completion_tokens.0.or(u.output_tokens.0),
        cached: cached(&u.prompt_tokens_details).or_else(|| cached(&u.input_tokens_details)),
        cache_read: u.cache_read_input_tokens.0,
        cache_write: u.cache_creation_input_tokens.0,
    });
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The reference reading: a full `Value` parse folded by `Usage::absorb`.
    fn reference(body: &[u8]) -> Option<Usage> {
        let v: Value = serde_json::from_slice(body).ok()?;
        let u = if v["usage"].is_object() {
            &v["usage"]
        } else {
            &v["response"]["usage"]
        };
        if !u.is_object() {
            return None;
        }
        let mut out = Usage::default();
        out.absorb(u);
        Some(out)
    }

    #[test]
    fn agrees_with_the_value_reading() {
        let bodies: &[&str] = &[
            r#"{"id":"x","choices":[{"message":{"content":"hi \"usage\""}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            r#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}"#,
            r#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":90000,"cache_creation_input_tokens":500}}"#,
            r#"{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":40}}}"#,
            r#"{"response":{"usage":{"input_tokens":7,"output_tokens":3,"input_tokens_details":{"cached_tokens":1}}}}"#,
            r#"{"usage":{"prompt_tokens":1.5,"completion_tokens":"7","extra":[1,{"a":2}]}}"#,
            r#"{"usage":{"prompt_tokens":-3,"completion_tokens":null}}"#,
            r#"{"usage":{}}"#,
            r#"{"id":"no usage","choices":[]}"#,
            "{}",
            "[1,2]",
            "not json",
            "",
        ];
        for b in bodies {
            assert_eq!(from_body(b.as_bytes()), reference(b.as_bytes()), "{b}");
        }
    }
}
