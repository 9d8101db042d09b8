//! Body limits (R14.2): the client's body is read whole, and refused with 413 as soon as it
//! passes `limits.max_body_bytes` — by its declared length before a byte is read, else at the
//! first byte past the limit.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;

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
