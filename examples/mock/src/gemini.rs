//! Gemini's native API in the mock upstream (`{base}/models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, PROVIDERS.md): whole answers, SSE answers (each event a
//! whole `GenerateContentResponse`, lines ending in `\r\n`, usage on the last), and errors
//! (`{"error": {code, message, status}}`; a bad key is Gemini's 400 `API_KEY_INVALID`).
use bytes::Bytes;

use super::json::{self, quote, CACHED_TOKENS, PROMPT_TOKENS};
use super::sse::SseParts;

/// The model a Gemini path names (`/v1beta/models/gemini-2.5-flash:generateContent`).
pub(crate) fn model_of(path: &str) -> Option<&str> {
    let rest = &path[path.find("/models/")? + "/models/".len()..];
    let (model, _) = rest.rsplit_once(':')?;
    (!model.is_empty() && !model.contains('/')).then_some(model)
}

/// Whether `path` is a Gemini method: `Some(stream)` for generateContent / streamGenerateContent.
pub(crate) fn method_of(path: &str) -> Option<bool> {
    model_of(path)?;
    if path.ends_with(":generateContent") {
        Some(false)
    } else if path.ends_with(":streamGenerateContent") {
        Some(true)
    } else {
        None
    }
}

fn usage(n: usize) -> String {
    format!(
        r#"{{"promptTokenCount":{p},"candidatesTokenCount":{n},"totalTokenCount":{t},"cachedContentTokenCount":{c},"promptTokensDetails":[{{"modality":"TEXT","tokenCount":{p}}}]}}"#,
        p = PROMPT_TOKENS,
        t = PROMPT_TOKENS + n as u64,
        c = CACHED_TOKENS,
    )
}

fn candidate(text: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or(String::new(), |f| format!(r#","finishReason":"{f}""#));
    format!(
        r#"[{{"content":{{"parts":[{{"text":{}}}],"role":"model"}}{finish},"index":0}}]"#,
        quote(text)
    )
}

/// A whole answer with `n` chunks of text; `m` is the quoted model.
pub(crate) fn answer(m: &str, n: usize) -> String {
    format!(
        r#"{{"candidates":{},"usageMetadata":{},"modelVersion":{m},"responseId":"mock-gemini-1"}}"#,
        candidate(&json::full_text(n), Some("STOP")),
        usage(n)
    )
}

fn event(json: &str) -> Bytes {
    Bytes::from(format!("data: {json}\r\n\r\n"))
}

/// A streamed answer: one event per chunk of text (usage so far, as Gemini reports it), the
/// last with `finishReason` and the whole usage.
pub(crate) fn stream(m: &str, n: usize) -> SseParts {
    let chunks = (0..n)
        .map(|i| {
            let mut t = String::new();
            json::push_chunk_text(&mut t, i);
            event(&format!(
                r#"{{"candidates":{},"usageMetadata":{{"promptTokenCount":{p},"totalTokenCount":{p}}},"modelVersion":{m},"responseId":"mock-gemini-1"}}"#,
                candidate(&t, None),
                p = PROMPT_TOKENS,
            ))
        })
        .collect();
    let tail = vec![event(&format!(
        r#"{{"candidates":{},"usageMetadata":{},"modelVersion":{m},"responseId":"mock-gemini-1"}}"#,
        candidate("", Some("STOP")),
        usage(n)
    ))];
    SseParts {
        head: Vec::new(),
        chunks,
        tail,
    }
}

/// Gemini's status name for an HTTP status.
fn status_name(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// The error body for `code`.
pub(crate) fn error(code: u16) -> String {
    format!(
        r#"{{"error":{{"code":{code},"message":"mock upstream error {code}","status":"{}"}}}}"#,
        status_name(code)
    )
}

/// The answer to a wrong or missing key: a 400, as Gemini gives it.
pub(crate) fn bad_key() -> String {
    concat!(
        r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","#,
        r#""details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#
    )
    .to_string()
}

/// An error in the stream (Gemini ends the stream with an error object).
pub(crate) fn error_event(code: u16) -> Bytes {
    event(&error(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_model_and_method() {
        let p = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";
        assert_eq!(model_of(p), Some("gemini-2.5-flash"));
        assert_eq!(method_of(p), Some(true));
        assert_eq!(method_of("/v1beta/models/g:generateContent"), Some(false));
        assert_eq!(method_of("/v1beta/models/g:countTokens"), None);
        assert_eq!(method_of("/v1beta/models"), None);
        assert_eq!(method_of("/v1/chat/completions"), None);
    }

    #[test]
    fn answers_parse_and_count_usage() {
        let v: serde_json::Value = serde_json::from_str(&answer("\"g\"", 3)).unwrap();
        assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 3);
        assert_eq!(v["candidates"][0]["finishReason"], "STOP");
        let s = stream("\"g\"", 2);
        assert_eq!(s.chunks.len(), 2);
        assert!(s.tail[0].ends_with(b"\r\n\r\n"));
        let e: serde_json::Value = serde_json::from_str(&error(429)).unwrap();
        assert_eq!(e["error"]["status"], "RESOURCE_EXHAUSTED");
    }
}
