//! The request of one upstream attempt (R1.2, R1.3, R14.3): the channel's base URL and the
//! provider's path, the client's headers through the one filter table, the provider's auth
//! and required headers, the idempotency key and request id, the channel's own headers.
//!
//! Architecture Invariant: the upstream URL is built only from the channel's configured base
//! URL; nothing in a request can choose the host (R14.3).

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Uri};

use super::provider::{self, Target};
use super::UpstreamBody;
use crate::config::model::{Channel, ChannelKind};
use crate::http::headers::{
    self, ANTHROPIC_BETA, ANTHROPIC_VERSION, IDEMPOTENCY_KEY, TRACEPARENT, TRACESTATE, X_REQUEST_ID,
};
use crate::routing::outcome::ChannelFault;
use crate::secret::Secret;

/// What one upstream attempt sends.
pub struct Outgoing<'a> {
    pub channel: &'a Channel,
    pub key: Option<&'a Secret>,
    pub method: Method,
    /// The path and query in the channel's wire format, e.g. `/v1/chat/completions?x=1`
    /// (the client's, or the translated request's); the provider places it (R1.2).
    pub path_and_query: &'a str,
    /// The upstream model and stream mode (Azure deployment paths, Gemini methods).
    pub target: Target<'a>,
    pub client_headers: &'a HeaderMap,
    pub body: UpstreamBody,
    /// Forwarded only on same-target retries and first attempts (R10.2).
    pub idempotency_key: Option<&'a HeaderValue>,
    /// The attempt span's W3C `traceparent` (R20.1), over the client's.
    pub traceparent: Option<&'a HeaderValue>,
    pub request_id: &'a HeaderValue,
}

/// A request that cannot be built from the channel's configuration: a `channel:*` failure of
/// that channel (it fails over and counts for auto-disable), never the client's fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// `InvalidKey` (the key cannot be a header value) or `InvalidRequest`.
    pub code: ChannelFault,
    pub message: String,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

fn invalid_request(message: String) -> BuildError {
    BuildError {
        code: ChannelFault::InvalidRequest,
        message,
    }
}

pub(super) fn invalid_key() -> BuildError {
    BuildError {
        code: ChannelFault::InvalidKey,
        message: "the channel key is not a valid header value".into(),
    }
}

/// `Content-Length` of a body of `len` bytes, in one exact allocation (hyper, left to set it,
/// builds the value with spare room and pays a second allocation for it).
fn content_length(len: usize) -> HeaderValue {
    let mut digits = itoa::Buffer::new();
    HeaderValue::from_str(digits.format(len)).unwrap_or_else(|_| HeaderValue::from(len))
}

/// Build the upstream request for `o` (the channel-kind adapter, R1.2).
pub fn build(outgoing: Outgoing<'_>) -> Result<Request<UpstreamBody>, BuildError> {
    let ch = outgoing.channel;
    let target = Target {
        api_version: &ch.api_version,
        ..outgoing.target
    };
    let pq = provider::of(ch.kind).path_and_query(
        &ch.base_url.path_prefix,
        outgoing.path_and_query,
        &target,
    );
    let uri = Uri::builder()
        .scheme(ch.base_url.scheme.clone())
        .authority(ch.base_url.authority.clone())
        .path_and_query(pq)
        .build()
        .map_err(|e| invalid_request(format!("invalid upstream uri: {e}")))?;
    let mut builder = Request::builder().method(outgoing.method).uri(uri);
    let headers = builder
        .headers_mut()
        .ok_or_else(|| invalid_request("request builder failed".into()))?;
    headers::to_upstream(outgoing.client_headers, headers, ch.forward_organization);
    if !ch.traceparent {
        // `channels.*.traceparent: false` (R20.1): no trace context leaves for this host.
        headers.remove(TRACEPARENT);
        headers.remove(TRACESTATE);
    } else if let Some(tp) = outgoing.traceparent {
        headers.insert(TRACEPARENT, tp.clone());
    }
    if ch.kind != ChannelKind::Anthropic {
        // Anthropic SDK headers mean nothing to the other providers (an Anthropic client on
        // a translated channel).
        headers.remove(ANTHROPIC_VERSION);
        headers.remove(ANTHROPIC_BETA);
    }
    let provider = provider::of(ch.kind);
    if let Some(key) = outgoing.key {
        provider.authenticate(key, headers)?;
    }
    provider.required_headers(headers);
    if let Some(k) = outgoing.idempotency_key {
        headers.insert(IDEMPOTENCY_KEY, k.clone());
    }
    headers.insert(X_REQUEST_ID, outgoing.request_id.clone());
    headers::channel_headers(ch, headers).map_err(invalid_request)?;
    if !outgoing.body.is_empty() && !headers.contains_key(header::CONTENT_TYPE) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if !outgoing.body.is_empty() {
        headers.insert(header::CONTENT_LENGTH, content_length(outgoing.body.len()));
    }
    // The relay reads SSE events and JSON usage: ask for plain bytes (an upstream that
    // compresses anyway is decoded by `UpBody`). The client's own Accept-Encoding is not
    // forwarded; compression towards clients belongs to a front proxy.
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    builder
        .body(outgoing.body)
        .map_err(|e| invalid_request(format!("invalid upstream request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gateway states the length of every body it sends (hyper then adds none of its
    /// own): the exact byte count, in decimal.
    #[test]
    fn content_length_is_the_body_size() {
        for len in [1usize, 9, 10, 62_000, 1 << 40] {
            assert_eq!(content_length(len), len.to_string().as_str());
        }
    }
}
