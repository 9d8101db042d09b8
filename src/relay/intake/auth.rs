//! Client authentication (R14.1): `Authorization: Bearer` or `x-api-key`, matched by SHA-256.
//!
//! The table maps SHA-256(key) → client, so plain and `key_sha256` clients are looked up the
//! same way; the final comparison of the digests is constant-time.

use std::sync::Arc;

use http::HeaderMap;
use subtle::ConstantTimeEq;

use crate::config::model::Client;
use crate::routing::compile::hash_key;
use crate::routing::table::RouteTable;

/// Longest key we even hash; longer is a plain 401.
const MAX_KEY_LEN: usize = 512;

/// The presented key, from `Authorization: Bearer` or `x-api-key`.
pub fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(v) = headers.get(http::header::AUTHORIZATION) {
        let bytes = v.as_bytes();
        let bytes = bytes
            .strip_prefix(b"Bearer ")
            .or_else(|| bytes.strip_prefix(b"bearer "))?;
        return Some(bytes.trim_ascii());
    }
    headers
        .get(crate::http::headers::X_API_KEY)
        .map(|v| v.as_bytes().trim_ascii())
}

/// The client owning the presented key, if any.
pub fn authenticate(table: &RouteTable, headers: &HeaderMap) -> Option<Arc<Client>> {
    let key = presented_key(headers)?;
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return None;
    }
    let digest = hash_key(key);
    // The table is keyed by each client's key digest (hashed once at compile time), so the
    // stored key is the expected digest; the final comparison is constant-time.
    let (expected, &idx) = table.client_by_hash.get_key_value(&digest)?;
    let client = table.clients.get(idx)?;
    bool::from(expected.ct_eq(&digest)).then(|| client.clone())
}
