//! Whole (non-stream) JSON answers of the mock upstream, per endpoint, and its error bodies.
use std::fmt::Write as _;

/// Prompt tokens of every answer, all input counted (OpenAI `prompt_tokens`, Responses
/// `input_tokens`; for Anthropic the sum of its three input counts).
pub const PROMPT_TOKENS: u64 = 10;
/// Of those, tokens read from the prompt cache (`prompt_tokens_details.cached_tokens`,
/// `input_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`).
pub const CACHED_TOKENS: u64 = 4;
/// Of those, tokens written to the prompt cache (Anthropic `cache_creation_input_tokens`).
pub const CACHE_WRITE_TOKENS: u64 = 2;
/// Content chunks of a normal answer; completion tokens equal the chunk count.
pub const DEFAULT_CHUNKS: usize = 3;
pub(crate) const CREATED: u64 = 1_700_000_000;

/// A JSON string literal (with quotes) for `s`.
pub(crate) fn quote(s: &str) -> String {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        out.push_str(s);
        out.push('"');
        out
    } else {
        serde_json::Value::from(s).to_string()
    }
}

/// The text of content chunk `i`.
pub(crate) fn push_chunk_text(out: &mut String, i: usize) {
    let _ = write!(out, "chunk {i} ");
}

/// All chunk texts of an answer with `n` chunks.
pub(crate) fn full_text(n: usize) -> String {
    let mut s = String::with_capacity(n * 9);
    for i in 0..n {
        push_chunk_text(&mut s, i);
    }
    s
}

pub(crate) fn chat(m: &str, n: usize) -> String {
    let text = full_text(n);
    format!(
        concat!(
            r#"{{"id":"chatcmpl-mock","object":"chat.completion","created":{c},"model":{m},"#,
            r#""choices":[{{"index":0,"message":{{"role":"assistant","content":"{t}"}},"#,
            r#""logprobs":null,"finish_reason":"stop"}}],"usage":{u}}}"#
        ),
        c = CREATED,
        m = m,
        t = text,
        u = openai_usage(n)
    )
}

pub(crate) fn openai_usage(n: usize) -> String {
    format!(
        concat!(
            r#"{{"prompt_tokens":{p},"completion_tokens":{n},"total_tokens":{t},"#,
            r#""prompt_tokens_details":{{"cached_tokens":{c}}},"#,
            r#""completion_tokens_details":{{"reasoning_tokens":0}}}}"#
        ),
        p = PROMPT_TOKENS,
        n = n,
        t = PROMPT_TOKENS + n as u64,
        c = CACHED_TOKENS
    )
}

pub(crate) fn completions(m: &str, n: usize) -> String {
    format!(
        concat!(
            r#"{{"id":"cmpl-mock","object":"text_completion","created":{c},"model":{m},"#,
            r#""choices":[{{"text":"{t}","index":0,"logprobs":null,"finish_reason":"stop"}}],"#,
            r#""usage":{u}}}"#
        ),
        c = CREATED,
        m = m,
        t = full_text(n),
        u = openai_usage(n)
    )
}

pub(crate) fn embeddings(m: &str, inputs: usize) -> String {
    let mut s = String::from(r#"{"object":"list","data":["#);
    for i in 0..inputs.max(1) {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            r#"{{"object":"embedding","index":{i},"embedding":[0.1,0.2,0.3,0.4]}}"#
        );
    }
    let _ = write!(
        s,
        r#"],"model":{m},"usage":{{"prompt_tokens":{p},"total_tokens":{p}}}}}"#,
        p = PROMPT_TOKENS
    );
    s
}

pub(crate) fn moderations(m: &str) -> String {
    format!(
        r#"{{"id":"modr-mock","model":{m},"results":[{{"flagged":false,"categories":{{}},"category_scores":{{}}}}]}}"#
    )
}

pub(crate) fn responses_object(m: &str, n: usize, status: &str, with_output: bool) -> String {
    let output = if with_output {
        format!(
            concat!(
                r#"[{{"type":"message","id":"msg_mock","status":"completed","role":"assistant","#,
                r#""content":[{{"type":"output_text","text":"{t}","annotations":[]}}]}}]"#
            ),
            t = full_text(n)
        )
    } else {
        "[]".to_string()
    };
    let usage = if with_output {
        format!(
            concat!(
                r#"{{"input_tokens":{p},"input_tokens_details":{{"cached_tokens":{c}}},"#,
                r#""output_tokens":{n},"output_tokens_details":{{"reasoning_tokens":0}},"#,
                r#""total_tokens":{t}}}"#
            ),
            p = PROMPT_TOKENS,
            c = CACHED_TOKENS,
            n = n,
            t = PROMPT_TOKENS + n as u64
        )
    } else {
        "null".to_string()
    };
    format!(
        concat!(
            r#"{{"id":"resp_mock","object":"response","created_at":{c},"status":"{s}","#,
            r#""model":{m},"output":{o},"usage":{u}}}"#
        ),
        c = CREATED,
        s = status,
        m = m,
        o = output,
        u = usage
    )
}

/// Anthropic's usage convention: `input_tokens` excludes both cache counts, so a prompt of
/// `input` tokens in all reports `input - cache reads - cache writes` there.
pub(crate) fn anthropic_usage(input: u64, output: usize) -> String {
    format!(
        concat!(
            r#"{{"input_tokens":{i},"cache_creation_input_tokens":{w},"#,
            r#""cache_read_input_tokens":{c},"output_tokens":{o}}}"#
        ),
        i = input.saturating_sub(CACHED_TOKENS + CACHE_WRITE_TOKENS),
        w = CACHE_WRITE_TOKENS,
        c = CACHED_TOKENS,
        o = output,
    )
}

pub(crate) fn messages(m: &str, n: usize) -> String {
    format!(
        concat!(
            r#"{{"id":"msg_mock","type":"message","role":"assistant","model":{m},"#,
            r#""content":[{{"type":"text","text":"{t}"}}],"stop_reason":"end_turn","#,
            r#""stop_sequence":null,"usage":{u}}}"#
        ),
        m = m,
        t = full_text(n),
        u = anthropic_usage(PROMPT_TOKENS, n)
    )
}

/// Anthropic's token count: every answer's prompt is [`PROMPT_TOKENS`].
pub(crate) fn count_tokens() -> String {
    format!(r#"{{"input_tokens":{PROMPT_TOKENS}}}"#)
}

pub(crate) fn images(m: &str) -> String {
    format!(
        r#"{{"created":{CREATED},"model":{m},"data":[{{"url":"https://images.invalid/mock.png","revised_prompt":"mock"}}]}}"#
    )
}

pub(crate) fn transcription(m: &str) -> String {
    format!(r#"{{"text":"mock transcription","model":{m}}}"#)
}

pub(crate) fn models<'a>(ids: impl Iterator<Item = &'a str>) -> String {
    let mut s = String::from(r#"{"object":"list","data":["#);
    for (i, id) in ids.enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            r#"{{"id":{},"object":"model","created":{CREATED},"owned_by":"mock"}}"#,
            quote(id)
        );
    }
    s.push_str("]}");
    s
}

pub(crate) fn video_created(id: u64, m: &str) -> String {
    format!(r#"{{"id":"task_{id}","object":"video","status":"queued","model":{m},"progress":0}}"#)
}

pub(crate) fn video_status(id: &str) -> String {
    format!(
        r#"{{"id":{},"object":"video","status":"completed","progress":100}}"#,
        quote(id)
    )
}

pub(crate) fn echo(path: &str, method: &str) -> String {
    format!(r#"{{"path":{},"method":{}}}"#, quote(path), quote(method))
}

/// OpenAI error `type` for a status.
fn openai_type(code: u16) -> &'static str {
    match code {
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// Anthropic error `type` for a status.
pub(crate) fn anthropic_type(code: u16) -> &'static str {
    match code {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// The default error body for `code`, in the endpoint's wire format.
pub(crate) fn status_error(code: u16, anthropic: bool) -> String {
    let msg = format!("mock upstream error {code}");
    if anthropic {
        anthropic_error(anthropic_type(code), &msg)
    } else {
        format!(
            r#"{{"error":{{"message":{},"type":"{}","param":null,"code":"{}"}}}}"#,
            quote(&msg),
            openai_type(code),
            code
        )
    }
}

pub(crate) fn anthropic_error(kind: &str, msg: &str) -> String {
    format!(
        r#"{{"type":"error","error":{{"type":"{kind}","message":{}}}}}"#,
        quote(msg)
    )
}

/// The 401 for a wrong or missing key; it echoes the key it got.
pub(crate) fn bad_key(got: &str, anthropic: bool) -> String {
    let msg = format!("Incorrect API key provided: {got}");
    if anthropic {
        anthropic_error("authentication_error", &msg)
    } else {
        format!(
            r#"{{"error":{{"message":{},"type":"invalid_request_error","code":"invalid_api_key"}}}}"#,
            quote(&msg)
        )
    }
}

/// The error object of a `HiddenError` (a 200 whose body is an error).
pub(crate) fn hidden_error(code: Option<u16>, anthropic: bool) -> String {
    let msg = "mock upstream hidden error";
    if anthropic {
        return anthropic_error(anthropic_type(code.unwrap_or(500)), msg);
    }
    match code {
        Some(c) => format!(r#"{{"error":{{"code":{c},"message":"{msg}"}}}}"#),
        None => format!(r#"{{"error":{{"code":"server_error","message":"{msg}"}}}}"#),
    }
}
