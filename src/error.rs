//! `GatewayError`: every error the gateway itself answers, rendered in the caller's wire format (R1.4).
//!
//! Each error has a stable `code`, an HTTP status, a message that says what to do, and a
//! low-cardinality `class` used as a metric label.

use bytes::Bytes;
use http::StatusCode;

/// The client's format: the wire format of the endpoint the client called, which decides the
/// shape of the gateway's own errors and of its rate-limit headers. A client speaks OpenAI or
/// Anthropic; a channel may also speak Gemini (`wire::translate::WireFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFormat {
    /// `{"error":{"message","type","code"}}`
    OpenAi,
    /// `{"type":"error","error":{"type","message"}}`
    Anthropic,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct GatewayError {
    pub status: StatusCode,
    /// Stable machine-readable code, e.g. `model_not_found`.
    pub code: &'static str,
    /// OpenAI `type` / Anthropic `error.type`.
    pub kind: &'static str,
    pub message: String,
}

impl GatewayError {
    pub fn new(
        status: StatusCode,
        code: &'static str,
        kind: &'static str,
        msg: impl Into<String>,
    ) -> Self {
        GatewayError {
            status,
            code,
            kind,
            message: msg.into(),
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "authentication_error",
            "missing or invalid API key: send `Authorization: Bearer <key>` (or `x-api-key` on /v1/messages) with a key configured under `clients`",
        )
    }

    pub fn bad_json(detail: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            "invalid_request_error",
            format!("request body is not valid JSON ({detail}); send a JSON object"),
        )
    }

    pub fn bad_request(code: &'static str, msg: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, "invalid_request_error", msg)
    }

    pub fn missing_model() -> Self {
        Self::bad_request(
            "missing_model",
            "request body has no string `model` field; name the model to use",
        )
    }

    pub fn model_not_found(model: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "model_not_found",
            "not_found_error",
            format!("model `{model}` is not available to your key; GET /v1/models lists the models you can use"),
        )
    }

    pub fn path_not_found(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "path_not_found",
            "not_found_error",
            format!("no channel serves `{path}` for your key"),
        )
    }

    /// A JSON-only endpoint asked with a body whose `Content-Type` is not JSON (`curl -d`
    /// sends `application/x-www-form-urlencoded`): the model it names was not read.
    pub fn not_json(path: &str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_content_type",
            "invalid_request_error",
            format!("`{path}` reads a JSON body: send `Content-Type: application/json` (this request's Content-Type is not JSON, so the model it names was not read)"),
        )
    }

    pub fn invalid_path(why: &str) -> Self {
        Self::bad_request(
            "invalid_path",
            format!("{why}; send the endpoint's path as it is documented, without `.`/`..` segments or encoded separators"),
        )
    }

    pub fn upgrade_required() -> Self {
        Self::new(
            StatusCode::UPGRADE_REQUIRED,
            "upgrade_not_supported",
            "invalid_request_error",
            "this gateway does not relay WebSocket or other protocol upgrades; send the request over plain HTTP (streaming uses server-sent events)",
        )
    }

    pub fn payload_too_large(limit: u64) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            "invalid_request_error",
            format!("request body exceeds the limit of {limit} bytes (limits.max_body_bytes)"),
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "invalid_request_error",
            "method not allowed on this path",
        )
    }

    pub fn no_channel_available(model: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_channel_available",
            "api_error",
            format!(
                "every channel for `{model}` is disabled or unavailable right now; retry later"
            ),
        )
    }

    pub fn breaker_open(channel: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "circuit_open",
            "api_error",
            format!("circuit breaker is open - provider {channel} temporarily unavailable"),
        )
    }

    pub fn upstream_unreachable(detail: &str) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            "api_error",
            format!("upstream failed: {detail}; retry later"),
        )
    }

    /// An upstream error that came as an event inside a 200 stream (R9.5), when no other
    /// attempt succeeded: its status, a type the caller's SDK maps to the same exception,
    /// and the upstream's message.
    pub fn upstream_status(status: u16, channel: &str, message: &str) -> Self {
        let status = StatusCode::from_u16(status)
            .ok()
            .filter(|s| s.is_client_error() || s.is_server_error())
            .unwrap_or(StatusCode::BAD_GATEWAY);
        let kind = match status.as_u16() {
            400 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        let message: String = message.chars().take(500).collect();
        Self::new(
            status,
            "upstream_error",
            kind,
            format!("upstream {channel} failed its stream with {status}: {message}"),
        )
    }

    pub fn upstream_timeout(detail: &str) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            "api_error",
            format!("upstream timed out: {detail}"),
        )
    }

    pub fn deadline_exceeded() -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "deadline_exceeded",
            "api_error",
            "the request deadline (timeouts.request_deadline) passed before any upstream answered",
        )
    }

    pub fn overloaded() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "overloaded_error",
            "the gateway is at its connection limit; retry shortly",
        )
    }

    pub fn shutting_down() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "overloaded_error",
            "the gateway is shutting down; retry",
        )
    }

    pub fn quota_exceeded(need: f64, left: f64) -> Self {
        Self::new(
            StatusCode::PAYMENT_REQUIRED,
            "insufficient_quota",
            "insufficient_quota",
            format!("quota exhausted: this request needs about {need:.4} credits and {left:.4} remain; ask the operator to raise `clients.<name>.quota`"),
        )
    }

    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "api_error",
            msg,
        )
    }

    /// The error body in `fmt`.
    pub fn body(&self, fmt: ClientFormat) -> Bytes {
        let body_json = match fmt {
            ClientFormat::OpenAi => serde_json::json!({
                "error": {"message": self.message, "type": self.kind, "code": self.code, "param": null}
            }),
            ClientFormat::Anthropic => serde_json::json!({
                "type": "error",
                "error": {"type": anthropic_type(self.status, self.kind), "message": self.message, "code": self.code}
            }),
        };
        Bytes::from(body_json.to_string())
    }
}

/// Anthropic's error types are fixed; map ours onto theirs.
fn anthropic_type(status: StatusCode, kind: &str) -> &'static str {
    match status.as_u16() {
        400 | 405 | 415 | 426 => "invalid_request_error",
        413 => "request_too_large",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        503 | 529 if kind == "overloaded_error" => "overloaded_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_shape() {
        let e = GatewayError::model_not_found("gpt-x");
        let v: serde_json::Value = serde_json::from_slice(&e.body(ClientFormat::OpenAi)).unwrap();
        assert_eq!(v["error"]["code"], "model_not_found");
        assert!(v["error"]["message"].as_str().unwrap().contains("gpt-x"));
    }

    #[test]
    fn anthropic_types_follow_the_status() {
        for (e, t) in [
            (GatewayError::payload_too_large(1), "request_too_large"),
            (GatewayError::upgrade_required(), "invalid_request_error"),
            (GatewayError::path_not_found("/v1/x"), "not_found_error"),
            (GatewayError::invalid_path("x"), "invalid_request_error"),
            (
                GatewayError::not_json("/v1/messages"),
                "invalid_request_error",
            ),
        ] {
            let v: serde_json::Value =
                serde_json::from_slice(&e.body(ClientFormat::Anthropic)).unwrap();
            assert_eq!(v["error"]["type"], t, "{e}");
        }
    }

    #[test]
    fn anthropic_shape() {
        let e = GatewayError::unauthorized();
        let v: serde_json::Value =
            serde_json::from_slice(&e.body(ClientFormat::Anthropic)).unwrap();
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "authentication_error");
    }
}
