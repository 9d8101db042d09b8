//! Provider kinds (R1.2): what each kind of channel adds to a request — where the client's
//! path goes under the base URL, how the key authenticates, which headers the provider
//! requires. One `Provider` per `ChannelKind`; a new kind (Azure's deployment paths and
//! `api-key`, Gemini's `x-goog-api-key`) is a new implementation here. A kind that signs the
//! whole request (SigV4) or presents a fetched token (OAuth) needs one more step after the
//! headers are final; it is added with the first such kind.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::build::{invalid_key, mark_sensitive, BuildError};
use crate::config::model::ChannelKind;
use crate::secret::Secret;

/// What a kind of provider adds to a request.
pub trait Provider: Sync {
    /// The upstream path and query: the client's `/v1/...` path and query under the base
    /// URL's path `prefix` (which already names the API version).
    fn path_and_query(&self, prefix: &str, client: &str) -> String {
        let rest = client.strip_prefix("/v1").unwrap_or(client);
        format!("{prefix}{rest}")
    }

    /// Authenticate with `key`; a key that cannot be a header value is the channel's
    /// `channel:invalid_key` failure.
    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError>;

    /// Headers the provider requires, when the client did not send them.
    fn required_headers(&self, _headers: &mut HeaderMap) {}
}

/// The provider of a channel kind.
pub fn of(kind: ChannelKind) -> &'static dyn Provider {
    match kind {
        ChannelKind::OpenAi => &OpenAi,
        ChannelKind::Anthropic => &Anthropic,
    }
}

/// OpenAI and every OpenAI-compatible API: `Authorization: Bearer`.
struct OpenAi;

impl Provider for OpenAi {
    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError> {
        let v =
            HeaderValue::try_from(format!("Bearer {}", key.expose())).map_err(|_| invalid_key())?;
        headers.insert(header::AUTHORIZATION, mark_sensitive(v));
        Ok(())
    }
}

/// Anthropic: `x-api-key`, and an `anthropic-version` unless the client chose one.
struct Anthropic;

impl Provider for Anthropic {
    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError> {
        let v = HeaderValue::try_from(key.expose()).map_err(|_| invalid_key())?;
        headers.insert(HeaderName::from_static("x-api-key"), mark_sensitive(v));
        Ok(())
    }

    fn required_headers(&self, headers: &mut HeaderMap) {
        if !headers.contains_key("anthropic-version") {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static("2023-06-01"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_authenticates_its_way() {
        let key = Secret::new("sk-1");
        let mut h = HeaderMap::new();
        of(ChannelKind::OpenAi).authenticate(&key, &mut h).unwrap();
        assert_eq!(h[header::AUTHORIZATION], "Bearer sk-1");
        assert!(h[header::AUTHORIZATION].is_sensitive());
        let mut h = HeaderMap::new();
        let a = of(ChannelKind::Anthropic);
        a.authenticate(&key, &mut h).unwrap();
        a.required_headers(&mut h);
        assert_eq!(
            (&h["x-api-key"], &h["anthropic-version"]),
            (
                &"sk-1".parse::<HeaderValue>().unwrap(),
                &"2023-06-01".parse::<HeaderValue>().unwrap()
            )
        );
        let mut h = HeaderMap::new();
        h.insert("anthropic-version", HeaderValue::from_static("2024-01-01"));
        a.required_headers(&mut h);
        assert_eq!(
            h["anthropic-version"], "2024-01-01",
            "the client's version is kept"
        );
        let bad = Secret::new("sk\n1");
        assert_eq!(
            of(ChannelKind::OpenAi)
                .authenticate(&bad, &mut h)
                .unwrap_err()
                .code,
            "channel:invalid_key"
        );
    }

    #[test]
    fn paths_go_under_the_base_url() {
        let p = of(ChannelKind::OpenAi);
        assert_eq!(
            p.path_and_query("/v1", "/v1/chat/completions?x=1"),
            "/v1/chat/completions?x=1"
        );
        assert_eq!(
            p.path_and_query("/api/paas/v4", "/v1/chat/completions"),
            "/api/paas/v4/chat/completions"
        );
        assert_eq!(p.path_and_query("", "/other"), "/other");
    }
}
