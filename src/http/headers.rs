//! The two header filter tables (R14.3, R14.4, B-header-hygiene): which
//! client headers reach an upstream, and which upstream headers reach the client.
//!
//! Both directions drop the hop-by-hop headers of RFC 9110 §7.6.1 — the fixed list and every
//! header the sender nominates in its own `Connection:` — since they describe one hop, not
//! the message. Client → upstream also drops what the gateway owns (auth, framing, `Expect`,
//! the idempotency key, cookies) and the account selectors `OpenAI-Organization` /
//! `OpenAI-Project` unless the channel sets `forward_organization`. Upstream → client also
//! drops what identifies the operator's upstream account or location
//! (`openai-organization`, `openai-project`, `anthropic-organization-id`, `location`,
//! `content-location`) and what belongs to the upstream's own connection (`set-cookie`,
//! `alt-svc`, `server`, `date`, its request id).

use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::config::model::Channel;

/// Hop-by-hop headers (RFC 9110 §7.6.1), dropped in both directions.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Client headers the gateway owns or never relays upstream.
const CLIENT_DROPPED: &[&str] = &[
    "host",
    "authorization",
    "x-api-key",
    "content-length",
    "expect",
    "accept-encoding",
    "idempotency-key",
    "cookie",
];

/// Client headers that pick an account scope of the operator's key: forwarded only where the
/// channel allows it (`channels.*.forward_organization`).
const ACCOUNT_SELECTORS: &[&str] = &["openai-organization", "openai-project"];

/// Upstream headers never relayed to clients.
const UPSTREAM_DROPPED: &[&str] = &[
    "content-length",
    "set-cookie",
    "server",
    "date",
    "x-request-id",
    "alt-svc",
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
    "location",
    "content-location",
];

/// Header names nominated by the `Connection:` headers of `h` (lower-cased tokens).
fn nominated(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Copy the client's headers that may go upstream into `out`.
pub fn to_upstream(client: &HeaderMap, out: &mut HeaderMap, forward_organization: bool) {
    let nominated = nominated(client);
    for (name, value) in client {
        let key = name.as_str();
        let dropped = HOP_BY_HOP.contains(&key)
            || CLIENT_DROPPED.contains(&key)
            || (!forward_organization && ACCOUNT_SELECTORS.contains(&key))
            || nominated.iter().any(|t| t == key);
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
}

/// The channel's configured `headers` (secrets: marked sensitive), set over what is there.
pub fn channel_headers(ch: &Channel, out: &mut HeaderMap) -> Result<(), String> {
    for (name, value) in &ch.headers {
        let mut header = HeaderValue::from_str(value.expose())
            .map_err(|_| format!("channel header {name} is not a valid header value"))?;
        header.set_sensitive(true);
        out.insert(name.clone(), header);
    }
    Ok(())
}

/// The upstream's headers, less those that may not reach the client: filtered in place (an
/// answer usually loses two or three names; a copy of the rest cost two allocations).
pub fn to_client(mut upstream: HeaderMap) -> HeaderMap {
    let nominated = nominated(&upstream);
    let dropped: smallvec::SmallVec<[HeaderName; 8]> = upstream
        .keys()
        .filter(|name| {
            let key = name.as_str();
            HOP_BY_HOP.contains(&key)
                || UPSTREAM_DROPPED.contains(&key)
                || nominated.iter().any(|t| t == key)
        })
        .cloned()
        .collect();
    for name in &dropped {
        upstream.remove(name);
    }
    upstream
}

/// `request-id`, which the Anthropic SDKs read as the request's id.
pub const ANTHROPIC_REQUEST_ID: HeaderName = HeaderName::from_static("request-id");

// Names the request path looks up on every request, made once: a lookup by `&str` checks
// and lowercases the name before it hashes it, each time.
pub const ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");
pub const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        headers
    }

    #[test]
    fn client_to_upstream() {
        let client = map(&[
            ("connection", "keep-alive, X-Secret-Hop"),
            ("connection", "x-other-hop"),
            ("x-secret-hop", "1"),
            ("x-other-hop", "1"),
            ("expect", "100-continue"),
            ("openai-organization", "org-victim"),
            ("openai-project", "proj-victim"),
            ("authorization", "Bearer client"),
            ("content-type", "application/json"),
            ("anthropic-beta", "x"),
        ]);
        let mut out = HeaderMap::new();
        to_upstream(&client, &mut out, false);
        let names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, vec!["content-type", "anthropic-beta"]);
        let mut out = HeaderMap::new();
        to_upstream(&client, &mut out, true);
        assert_eq!(out["openai-organization"], "org-victim");
        assert_eq!(out["openai-project"], "proj-victim");
        assert!(!out.contains_key("expect"));
    }

    #[test]
    fn upstream_to_client() {
        let upstream = map(&[
            ("connection", "x-hop"),
            ("x-hop", "1"),
            ("openai-organization", "org-operator"),
            ("anthropic-organization-id", "uuid"),
            ("location", "https://upstream.internal/v1/x"),
            ("x-ratelimit-remaining-requests", "9"),
            ("content-type", "application/json"),
        ]);
        let out = to_client(upstream);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            vec!["content-type", "x-ratelimit-remaining-requests"]
        );
        assert_eq!(out.len(), 2, "every value of a dropped name goes");
    }
}
