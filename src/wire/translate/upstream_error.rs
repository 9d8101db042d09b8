//! Upstream errors in any format (OpenAI `{"error":{message,type,code}}`, Anthropic
//! `{"type":"error","error":{type,message}}`, Gemini `{"error":{code,message,status}}`) read
//! into one `UpstreamError` and written in the client's format with the status and type that
//! format uses for the same condition (Anthropic `overloaded_error` 529 ↔ OpenAI 503,
//! Gemini `RESOURCE_EXHAUSTED` → 429 `rate_limit_error`).

use serde_json::{json, Value};

use super::WireFormat;

/// What went wrong, format-neutral.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidRequest,
    Authentication,
    /// Out of credit (OpenAI `insufficient_quota`, Anthropic `billing_error`).
    Billing,
    Permission,
    NotFound,
    RequestTooLarge,
    RateLimit,
    /// An upstream failure (5xx) or an answer that cannot be read or expressed.
    Api,
    Overloaded,
    Timeout,
    /// The provider's safety system blocked the prompt or the answer.
    ContentFilter,
}

/// An error reported by an upstream (status, body or mid-stream event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamError {
    /// The upstream's HTTP status (or the one its error stands for).
    pub status: u16,
    pub kind: ErrorKind,
    pub message: String,
    /// The upstream's machine-readable code, when it gave one.
    pub code: Option<String>,
}

/// An error ready to relay to the client.
#[derive(Debug, Clone)]
pub struct TranslatedError {
    pub status: u16,
    pub body: Vec<u8>,
    pub error: UpstreamError,
}

/// Translate an upstream error response (`status`, `body` in format `from`) for a client of
/// format `to`.
pub fn translate_error(
    from: WireFormat,
    status: u16,
    body: &[u8],
    to: WireFormat,
) -> TranslatedError {
    let error = UpstreamError::parse(from, status, body);
    TranslatedError {
        status: error.client_status(to),
        body: error.body(to),
        error,
    }
}

impl UpstreamError {
    pub fn new(status: u16, kind: ErrorKind, message: impl Into<String>) -> Self {
        UpstreamError {
            status,
            kind,
            message: message.into(),
            code: None,
        }
    }

    /// An upstream answer the translator cannot read: a 502, worth another channel.
    pub fn bad_answer(from: WireFormat, detail: impl std::fmt::Display) -> Self {
        UpstreamError::new(
            502,
            ErrorKind::Api,
            format!(
                "the {} upstream sent an answer that cannot be translated: {detail}",
                from.name()
            ),
        )
    }

    /// Read an error body of format `from` (any JSON shape; a non-JSON body becomes the message).
    pub fn parse(from: WireFormat, status: u16, body: &[u8]) -> Self {
        match serde_json::from_slice::<Value>(body) {
            Ok(v) => Self::from_value(from, status, &v),
            Err(_) => {
                let text = String::from_utf8_lossy(&body[..body.len().min(1024)]);
                UpstreamError::new(status, kind_of_status(status), text.trim().to_string())
            }
        }
    }

    /// Read an error object (an error body or the data of a mid-stream error event). `status`
    /// is the HTTP status it came with, or 0 for a stream event: then the kind decides it.
    pub fn from_value(from: WireFormat, status: u16, value: &Value) -> Self {
        // Gemini streams wrap errors in an array.
        let value = value.as_array().and_then(|a| a.first()).unwrap_or(value);
        let err = if value["error"].is_object() {
            &value["error"]
        } else {
            value
        };
        let field = |k: &str| err[k].as_str().map(str::to_string);
        let message = field("message")
            .or_else(|| value["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("upstream error (HTTP {status})"));
        let status = embedded_status(err).unwrap_or(status);
        let known = (400..=599).contains(&status).then_some(status);
        let (kind, code) = match from {
            WireFormat::OpenAi => (
                openai_kind(known, err),
                field("code").or_else(|| field("type")),
            ),
            WireFormat::Anthropic => {
                let ty = field("type");
                let kind = ty.as_deref().and_then(anthropic_kind);
                (
                    kind.unwrap_or_else(|| known.map_or(ErrorKind::Api, kind_of_status)),
                    ty,
                )
            }
            WireFormat::Gemini => {
                let st = field("status");
                (gemini_kind(known, st.as_deref(), err), st)
            }
        };
        let status = known.unwrap_or_else(|| default_status(kind, from));
        UpstreamError {
            status,
            kind,
            message,
            code,
        }
    }

    /// The status a client of format `to` gets for this error.
    pub fn client_status(&self, to: WireFormat) -> u16 {
        match (self.kind, to) {
            (ErrorKind::InvalidRequest | ErrorKind::ContentFilter, _) => 400,
            (ErrorKind::Authentication, _) => 401,
            (ErrorKind::Billing, WireFormat::Anthropic) => 402,
            (ErrorKind::Billing, _) => 429,
            (ErrorKind::Permission, _) => 403,
            (ErrorKind::NotFound, _) => 404,
            (ErrorKind::RequestTooLarge, _) => 413,
            (ErrorKind::RateLimit, _) => 429,
            (ErrorKind::Overloaded, WireFormat::Anthropic) => 529,
            (ErrorKind::Overloaded, _) => 503,
            (ErrorKind::Timeout, _) => 504,
            (ErrorKind::Api, _) if (500..=599).contains(&self.status) => self.status,
            (ErrorKind::Api, _) => 502,
        }
    }

    /// The error type string of format `to`.
    pub fn client_type(&self, to: WireFormat) -> &'static str {
        match (self.kind, to) {
            (ErrorKind::InvalidRequest | ErrorKind::ContentFilter, _) => "invalid_request_error",
            (ErrorKind::Authentication, _) => "authentication_error",
            (ErrorKind::Billing, WireFormat::Anthropic) => "billing_error",
            (ErrorKind::Billing, _) => "insufficient_quota",
            (ErrorKind::Permission, _) => "permission_error",
            (ErrorKind::NotFound, _) => "not_found_error",
            (ErrorKind::RequestTooLarge, WireFormat::Anthropic) => "request_too_large",
            (ErrorKind::RequestTooLarge, _) => "invalid_request_error",
            (ErrorKind::RateLimit, _) => "rate_limit_error",
            (ErrorKind::Overloaded, _) => "overloaded_error",
            (ErrorKind::Timeout, WireFormat::Anthropic) => "timeout_error",
            (ErrorKind::Timeout | ErrorKind::Api, _) => "api_error",
        }
    }

    fn code(&self) -> Value {
        match (&self.code, self.kind) {
            (_, ErrorKind::ContentFilter) => "content_filter".into(),
            (Some(c), _) => c.as_str().into(),
            (None, _) => Value::Null,
        }
    }

    /// The error body in format `to` (`Gemini` is never a client; it gets the OpenAI shape).
    pub fn body(&self, to: WireFormat) -> Vec<u8> {
        self.value(to).to_string().into_bytes()
    }

    fn value(&self, to: WireFormat) -> Value {
        match to {
            WireFormat::Anthropic => json!({
                "type": "error",
                "error": {"type": self.client_type(to), "message": self.message},
            }),
            WireFormat::OpenAi | WireFormat::Gemini => json!({
                "error": {
                    "message": self.message,
                    "type": self.client_type(to),
                    "param": null,
                    "code": self.code(),
                },
            }),
        }
    }

    /// The mid-stream error event of format `to` (`event: error` for Anthropic, a `data:`
    /// line with an `error` object for OpenAI).
    pub fn sse_event(&self, to: WireFormat, out: &mut Vec<u8>) {
        if to == WireFormat::Anthropic {
            out.extend_from_slice(b"event: error\n");
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(self.value(to).to_string().as_bytes());
        out.extend_from_slice(b"\n\n");
    }
}

/// Whether an error body carries its own HTTP status.
pub(crate) fn has_embedded_status(value: &Value) -> bool {
    let value = value.as_array().and_then(|a| a.first()).unwrap_or(value);
    let err = if value["error"].is_object() {
        &value["error"]
    } else {
        value
    };
    embedded_status(err).is_some()
}

/// A status carried inside the error object (`code: 429` in OpenAI-compatible and Gemini bodies).
fn embedded_status(err: &Value) -> Option<u16> {
    let code = &err["code"];
    let status = code
        .as_u64()
        .or_else(|| code.as_str().and_then(|s| s.parse().ok()))?;
    u16::try_from(status)
        .ok()
        .filter(|status| (400..=599).contains(status))
}

pub(crate) fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        401 => ErrorKind::Authentication,
        402 => ErrorKind::Billing,
        403 => ErrorKind::Permission,
        404 => ErrorKind::NotFound,
        413 => ErrorKind::RequestTooLarge,
        429 => ErrorKind::RateLimit,
        503 | 529 => ErrorKind::Overloaded,
        504 => ErrorKind::Timeout,
        500..=599 => ErrorKind::Api,
        _ => ErrorKind::InvalidRequest,
    }
}

/// The status an error of `kind` stands for when it came without one (stream events).
fn default_status(kind: ErrorKind, from: WireFormat) -> u16 {
    match kind {
        ErrorKind::InvalidRequest | ErrorKind::ContentFilter => 400,
        ErrorKind::Authentication => 401,
        ErrorKind::Billing => 402,
        ErrorKind::Permission => 403,
        ErrorKind::NotFound => 404,
        ErrorKind::RequestTooLarge => 413,
        ErrorKind::RateLimit => 429,
        ErrorKind::Api => 500,
        ErrorKind::Overloaded if from == WireFormat::Anthropic => 529,
        ErrorKind::Overloaded => 503,
        ErrorKind::Timeout => 504,
    }
}

/// OpenAI errors: the status decides, except quota and content-filter codes; a stream error
/// (no status) is read by its type or code.
fn openai_kind(status: Option<u16>, err: &Value) -> ErrorKind {
    let is = |k: &str, value: &str| err[k].as_str() == Some(value);
    let any = |vs: &[&str]| {
        vs.iter()
            .any(|value| is("type", value) || is("code", value))
    };
    if any(&["insufficient_quota"]) {
        return ErrorKind::Billing;
    }
    if any(&["content_filter", "content_policy_violation"]) {
        return ErrorKind::ContentFilter;
    }
    if let Some(s) = status {
        return kind_of_status(s);
    }
    if any(&["invalid_request_error"]) {
        ErrorKind::InvalidRequest
    } else if any(&["authentication_error", "invalid_api_key"]) {
        ErrorKind::Authentication
    } else if any(&[
        "rate_limit_exceeded",
        "rate_limit_error",
        "requests",
        "tokens",
    ]) {
        ErrorKind::RateLimit
    } else if any(&["overloaded_error"]) {
        ErrorKind::Overloaded
    } else {
        ErrorKind::Api
    }
}

pub(crate) fn is_anthropic_type(ty: &str) -> bool {
    anthropic_kind(ty).is_some()
}

fn anthropic_kind(ty: &str) -> Option<ErrorKind> {
    Some(match ty {
        "invalid_request_error" => ErrorKind::InvalidRequest,
        "authentication_error" => ErrorKind::Authentication,
        "billing_error" => ErrorKind::Billing,
        "permission_error" => ErrorKind::Permission,
        "not_found_error" => ErrorKind::NotFound,
        "request_too_large" => ErrorKind::RequestTooLarge,
        "rate_limit_error" => ErrorKind::RateLimit,
        "api_error" => ErrorKind::Api,
        "overloaded_error" => ErrorKind::Overloaded,
        "timeout_error" => ErrorKind::Timeout,
        _ => return None,
    })
}

/// Gemini's `status` (google.rpc.Code names); an invalid API key comes as `INVALID_ARGUMENT`
/// with reason `API_KEY_INVALID` and is an authentication failure.
fn gemini_kind(status: Option<u16>, st: Option<&str>, err: &Value) -> ErrorKind {
    let key_invalid = err["details"]
        .as_array()
        .is_some_and(|d| d.iter().any(|x| x["reason"] == "API_KEY_INVALID"));
    match st {
        _ if key_invalid => ErrorKind::Authentication,
        Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE") => {
            ErrorKind::InvalidRequest
        }
        Some("UNAUTHENTICATED") => ErrorKind::Authentication,
        Some("PERMISSION_DENIED") => ErrorKind::Permission,
        Some("NOT_FOUND") => ErrorKind::NotFound,
        Some("RESOURCE_EXHAUSTED") => ErrorKind::RateLimit,
        Some("UNAVAILABLE") => ErrorKind::Overloaded,
        Some("DEADLINE_EXCEEDED") => ErrorKind::Timeout,
        Some("INTERNAL" | "UNKNOWN" | "DATA_LOSS") => ErrorKind::Api,
        _ => status.map_or(ErrorKind::Api, kind_of_status),
    }
}
