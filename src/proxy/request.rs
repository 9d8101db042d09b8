//! Reading the client body within the size limit, peeking at `model`/`stream`, and the
//! byte-preserving `model` rewrite (R1.3, R14.2).

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::GatewayError;

/// Read the whole body, refusing (413) as soon as it passes `limit` bytes — without reading further.
pub async fn read_limited(
    body: Incoming,
    declared_len: Option<u64>,
    limit: u64,
) -> Result<Bytes, GatewayError> {
    if declared_len.is_some_and(|n| n > limit) {
        return Err(GatewayError::payload_too_large(limit));
    }
    let mut body = body;
    let mut buf = BytesMut::with_capacity(declared_len.unwrap_or(1024).min(limit) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            GatewayError::bad_request(
                "unreadable_body",
                format!("could not read the request body: {e}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if buf.len() as u64 + data.len() as u64 > limit {
                return Err(GatewayError::payload_too_large(limit));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// The few fields the gateway reads from a JSON request body.
#[derive(Debug, Clone)]
pub struct Peek {
    pub model: Option<String>,
    /// Byte range of the `model` value (the JSON string token, quotes included).
    pub model_span: Option<(usize, usize)>,
    pub stream: bool,
    /// Byte range of the `stream` value token, when present.
    pub stream_span: Option<(usize, usize)>,
}

#[derive(Deserialize)]
struct RawPeek<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    stream: Option<&'a RawValue>,
}

fn span_of(body: &[u8], raw: &RawValue) -> (usize, usize) {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    (start, start + raw.get().len())
}

/// Parse the body enough to route it. Bodies that are not a JSON object are a 400.
pub fn peek(body: &[u8]) -> Result<Peek, GatewayError> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(GatewayError::bad_json("expected a JSON object"));
    }
    let raw: RawPeek =
        serde_json::from_slice(body).map_err(|e| GatewayError::bad_json(&e.to_string()))?;
    let (model, model_span) = match raw.model {
        Some(m) => {
            let s: String =
                serde_json::from_str(m.get()).map_err(|_| GatewayError::missing_model())?;
            (Some(s), Some(span_of(body, m)))
        }
        None => (None, None),
    };
    let (stream, stream_span) = match raw.stream {
        Some(s) => (s.get() == "true", Some(span_of(body, s))),
        None => (false, None),
    };
    Ok(Peek {
        model,
        model_span,
        stream,
        stream_span,
    })
}

/// Replace the bytes of `span` with `replacement`; everything else is kept byte for byte.
pub fn splice(body: &Bytes, span: (usize, usize), replacement: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(body.len() + replacement.len());
    out.extend_from_slice(&body[..span.0]);
    out.extend_from_slice(replacement);
    out.extend_from_slice(&body[span.1..]);
    out.freeze()
}

/// The body to send upstream with `model` rewritten to `upstream_model` (only when it differs).
pub fn rewrite_model(body: &Bytes, peek: &Peek, upstream_model: &str) -> Bytes {
    match (&peek.model, peek.model_span) {
        (Some(m), Some(span)) if m != upstream_model => {
            let quoted = serde_json::to_string(upstream_model)
                .unwrap_or_else(|_| format!("\"{upstream_model}\""));
            splice(body, span, quoted.as_bytes())
        }
        _ => body.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_and_rewrite_keep_other_bytes() {
        let body = Bytes::from_static(br#"{ "messages":[{"role":"user","content":"hi \"x\""}], "model" : "deepseek-chat","stream":true , "n":1}"#);
        let p = peek(&body).unwrap();
        assert_eq!(p.model.as_deref(), Some("deepseek-chat"));
        assert!(p.stream);
        let out = rewrite_model(&body, &p, "deepseek-v3");
        assert_eq!(
            &out[..],
            &br#"{ "messages":[{"role":"user","content":"hi \"x\""}], "model" : "deepseek-v3","stream":true , "n":1}"#[..]
        );
    }

    #[test]
    fn same_model_is_not_copied() {
        let body = Bytes::from_static(br#"{"model":"m"}"#);
        let p = peek(&body).unwrap();
        assert_eq!(rewrite_model(&body, &p, "m"), body);
    }

    #[test]
    fn bad_json_and_non_string_model() {
        assert_eq!(peek(b"{not json").unwrap_err().code, "invalid_json");
        assert_eq!(peek(b"[1,2]").unwrap_err().code, "invalid_json");
        assert_eq!(peek(br#"{"model":5}"#).unwrap_err().code, "missing_model");
        assert!(peek(br#"{"prompt":"x"}"#).unwrap().model.is_none());
    }

    #[test]
    fn escaped_model_name_is_decoded() {
        let p = peek(br#"{"model":"a\u0062c"}"#).unwrap();
        assert_eq!(p.model.as_deref(), Some("abc"));
    }
}
