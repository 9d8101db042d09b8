//! Hidden errors (R9.5): a 200 whose body is only an `{"error":{...}}` object.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use serde_json::Value;

/// The key every hidden error carries, searched for before any parse (built once: a finder
/// costs more to build than to run over a short body).
static ERROR_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"error\""));

/// `Some(status)` when `v` is an error-only object: the status embedded in `error.code`
/// (or `error.status`) when it is an HTTP error status (400–599), else `None` (the caller
/// maps it to 502).
/// Returns `None` (outer) when `v` is not an error-only object.
pub fn embedded_error(v: &Value) -> Option<Option<u16>> {
    let obj = v.as_object()?;
    let err = obj.get("error")?;
    // Only an error: no other meaningful top-level fields (OpenAI/Anthropic success bodies
    // carry id/choices/content/output/data).
    let allowed = ["error", "type"];
    if obj.keys().any(|k| !allowed.contains(&k.as_str())) || !(err.is_object() || err.is_string()) {
        return None;
    }
    let code = ["code", "status"].iter().find_map(|k| {
        let value = &err[*k];
        value
            .as_u64()
            .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
    });
    // Only an error status may become the client's status: a `code` of 200 or 302 inside an
    // error object is not a reason to answer 200 or redirect.
    let code = code.filter(|c| (400..=599).contains(c)).map(|c| c as u16);
    Some(code.or_else(|| anthropic_status(err["type"].as_str()?)))
}

/// The status an Anthropic error type stands for (Anthropic error bodies carry no number).
fn anthropic_status(ty: &str) -> Option<u16> {
    Some(match ty {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "overloaded_error" => 529,
        _ => return None,
    })
}

/// Check a complete non-stream body (R9.5).
pub fn body_hidden_error(body: &[u8]) -> Option<Option<u16>> {
    if body.len() > 64 * 1024 || ERROR_KEY.find(body).is_none() {
        return None;
    }
    let parsed: Value = serde_json::from_slice(body).ok()?;
    embedded_error(&parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, Option<Option<u16>>)] = &[
            (r#"{"error":{"code":429,"message":"x"}}"#, Some(Some(429))),
            (r#"{"error":{"code":"503","message":"x"}}"#, Some(Some(503))),
            (
                r#"{"error":{"code":"rate_limited","message":"x"}}"#,
                Some(None),
            ),
            (r#"{"error":{"code":42,"message":"x"}}"#, Some(None)),
            (r#"{"error":{"code":200,"message":"x"}}"#, Some(None)),
            (r#"{"error":{"code":"302","message":"x"}}"#, Some(None)),
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#,
                Some(Some(529)),
            ),
            (
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"x"}}"#,
                Some(Some(429)),
            ),
            (
                r#"{"type":"error","error":{"type":"something_new","message":"x"}}"#,
                Some(None),
            ),
            (r#"{"id":"x","choices":[],"error":null}"#, None),
            (r#"{"id":"x","choices":[]}"#, None),
            ("[1]", None),
        ];
        for (body, want) in cases {
            assert_eq!(body_hidden_error(body.as_bytes()), *want, "{body}");
        }
    }
}
