//! Reading upstream bodies within their time gates and size bounds: error bodies (bounded,
//! for classification and relaying), JSON answers (read whole up to
//! [`MAX_INSPECTED_BODY`] for inspection) and the first bytes of a pass-through body.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, CONTENT_TYPE};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::time::{timeout_at, Instant};

use super::body::UpBody;
use crate::routing::policy::TransportKind;

const MAX_ERROR_BODY: usize = 64 * 1024;

/// Read an upstream body completely, before `deadline` and within `max` bytes.
pub async fn read_body<B>(
    body: &mut B,
    deadline: Instant,
    max: usize,
) -> Result<Bytes, TransportKind>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut buf = BytesMut::new();
    loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(TransportKind::BodyTimeout),
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(_))) => return Err(TransportKind::Broken),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    if buf.len() + d.len() > max {
                        return Err(TransportKind::Broken);
                    }
                    buf.extend_from_slice(&d);
                }
            }
        }
    }
}

/// Read an error body (bounded) for classification and for relaying to the client.
pub async fn read_error<B>(body: &mut B, deadline: Instant) -> Bytes
where
    B: Body<Data = Bytes> + Unpin,
{
    let wait_until = deadline.min(Instant::now() + Duration::from_secs(10));
    read_body(body, wait_until, MAX_ERROR_BODY)
        .await
        .unwrap_or_default()
}

/// Largest JSON answer read into memory for inspection; a larger one is streamed through.
pub const MAX_INSPECTED_BODY: usize = 8 * 1024 * 1024;

/// Is this answer one that must be inspected (JSON, or untyped)?
pub fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let ct = ct.split(';').next().unwrap_or("").trim().as_bytes();
    let json_suffix = ct.len() >= 5 && ct[ct.len() - 5..].eq_ignore_ascii_case(b"+json");
    ct.is_empty() || ct.eq_ignore_ascii_case(b"application/json") || json_suffix
}

/// A non-stream body read for inspection.
pub enum Read {
    /// The whole body, within the bound.
    Whole(Bytes),
    /// The first bytes of a body past the bound; the rest is still in the upstream body.
    TooLarge(Bytes),
}

/// Read a JSON answer before `deadline`: whole when it fits [`MAX_INSPECTED_BODY`].
pub async fn read_json(body: &mut UpBody, deadline: Instant) -> Result<Read, TransportKind> {
    let mut buf = BytesMut::new();
    loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(TransportKind::BodyTimeout),
            Ok(None) => return Ok(Read::Whole(buf.freeze())),
            Ok(Some(Err(_))) => return Err(TransportKind::Broken),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    buf.extend_from_slice(&d);
                    if buf.len() > MAX_INSPECTED_BODY {
                        return Ok(Read::TooLarge(buf.freeze()));
                    }
                }
            }
        }
    }
}

/// The first bytes of a pass-through body before `deadline`; `None` when it is empty.
pub async fn first_chunk(
    body: &mut UpBody,
    deadline: Instant,
) -> Result<Option<Bytes>, TransportKind> {
    loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(TransportKind::BodyTimeout),
            Ok(None) => return Ok(None),
            Ok(Some(Err(_))) => return Err(TransportKind::Broken),
            Ok(Some(Ok(frame))) => match frame.into_data() {
                Ok(d) if !d.is_empty() => return Ok(Some(d)),
                _ => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The content type is compared without case and without a lowercased copy, as a
    /// lowercased comparison would (the reference below).
    #[test]
    fn json_content_types_are_recognised_without_case() {
        fn reference(ct: &str) -> bool {
            let ct = ct
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            ct.is_empty() || ct == "application/json" || ct.ends_with("+json")
        }
        for ct in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/problem+JSON",
            " application/vnd.api+json ;x=1",
            "+json",
            "json",
            "text/plain",
            "text/event-stream",
            "application/jsonl",
            "",
            ";",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, http::HeaderValue::from_str(ct).unwrap());
            assert_eq!(is_json(&headers), reference(ct), "{ct:?}");
        }
        assert!(is_json(&HeaderMap::new()));
    }
}
