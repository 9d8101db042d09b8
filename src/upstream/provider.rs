//! Provider kinds (R1.2): what each kind of channel adds to a request — where the request goes
//! under the base URL, how the key authenticates, which headers the provider requires. One
//! `Provider` per `ChannelKind`: OpenAI(-compatible) `Authorization: Bearer`, Anthropic
//! `x-api-key`, Azure OpenAI deployment paths with `api-key`, Gemini `models/{model}:...` with
//! `x-goog-api-key`.
//!
//! Room for signing kinds: a kind that signs the whole request (AWS SigV4 for Bedrock) or
//! presents a fetched token (OAuth for Vertex) needs one more step after the headers are final
//! (`fn sign(&self, req: &mut Request<..>)`, called last in `build`, with access to the body
//! bytes) and, for OAuth, a token cache outside this pure trait. Neither is built yet.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::build::{invalid_key, BuildError};
use crate::config::model::ChannelKind;
use crate::http::headers::{ANTHROPIC_VERSION, X_API_KEY};
use crate::secret::Secret;

/// What the path of one request depends on besides the client's path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// The upstream model (Azure: the deployment; Gemini: the model in the URL); "" for a
    /// request that names none (pass-through paths).
    pub model: &'a str,
    /// The upstream is asked for a stream (Gemini chooses its method by it).
    pub stream: bool,
    /// Azure's `api-version`.
    pub api_version: &'a str,
}

/// What a kind of provider adds to a request.
pub trait Provider: Sync {
    /// The upstream path and query: the request's `/v1/...` path and query (in the channel's
    /// own wire format) under the base URL's path `prefix` (which already names the API
    /// version).
    fn path_and_query(&self, prefix: &str, client: &str, _t: &Target) -> String {
        let rest = client.strip_prefix("/v1").unwrap_or(client);
        let mut pq = String::with_capacity(prefix.len() + rest.len());
        pq.push_str(prefix);
        pq.push_str(rest);
        pq
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
        ChannelKind::Azure => &Azure,
        ChannelKind::Gemini => &Gemini,
    }
}

/// `key` as a sensitive header value (built once per key, kept with it).
fn key_value(key: &Secret) -> Result<HeaderValue, BuildError> {
    key.header_value().ok_or_else(invalid_key)
}

/// OpenAI and every OpenAI-compatible API: `Authorization: Bearer`.
struct OpenAi;

impl Provider for OpenAi {
    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError> {
        let bearer = key.bearer_value().ok_or_else(invalid_key)?;
        headers.insert(header::AUTHORIZATION, bearer);
        Ok(())
    }
}

/// Anthropic: `x-api-key`, and an `anthropic-version` unless the client chose one.
struct Anthropic;

impl Provider for Anthropic {
    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError> {
        headers.insert(X_API_KEY, key_value(key)?);
        Ok(())
    }

    fn required_headers(&self, headers: &mut HeaderMap) {
        if !headers.contains_key(ANTHROPIC_VERSION) {
            headers.insert(ANTHROPIC_VERSION, HeaderValue::from_static("2023-06-01"));
        }
    }
}

/// Azure OpenAI: `/v1/X` goes to `/openai/deployments/{deployment}/X?api-version=...` under
/// the resource endpoint (the deployment is the mapped model name), `api-key` authenticates.
struct Azure;

impl Provider for Azure {
    fn path_and_query(&self, prefix: &str, client: &str, target: &Target) -> String {
        let (path, query) = client.split_once('?').unwrap_or((client, ""));
        let rest = path.strip_prefix("/v1").unwrap_or(path);
        let mut out = if target.model.is_empty() {
            format!("{prefix}/openai{rest}")
        } else {
            format!(
                "{prefix}/openai/deployments/{}{rest}",
                encode_segment(target.model)
            )
        };
        out.push_str("?api-version=");
        out.push_str(target.api_version);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            if !pair.starts_with("api-version=") {
                out.push('&');
                out.push_str(pair);
            }
        }
        out
    }

    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError> {
        headers.insert(HeaderName::from_static("api-key"), key_value(key)?);
        Ok(())
    }
}

/// Gemini's native API: `{base}/models/{model}:generateContent`, or
/// `:streamGenerateContent?alt=sse` for a stream; `x-goog-api-key` authenticates. Requests
/// reach it only translated (the request path is not the client's).
struct Gemini;

impl Provider for Gemini {
    fn path_and_query(&self, prefix: &str, client: &str, target: &Target) -> String {
        if target.model.is_empty() {
            // A request naming no model (the probe's `GET /v1/models`): the plain mapping.
            let rest = client.strip_prefix("/v1").unwrap_or(client);
            return format!("{prefix}{rest}");
        }
        let model = encode_segment(target.model.strip_prefix("models/").unwrap_or(target.model));
        if target.stream {
            format!("{prefix}/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{prefix}/models/{model}:generateContent")
        }
    }

    fn authenticate(&self, key: &Secret, headers: &mut HeaderMap) -> Result<(), BuildError> {
        headers.insert(HeaderName::from_static("x-goog-api-key"), key_value(key)?);
        Ok(())
    }
}

/// A model or deployment name as one path segment: unreserved characters kept, the rest
/// percent-encoded (a name can never add a path segment or a query).
fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_authenticates_its_way() {
        let key = Secret::new("sk-1");
        let mut headers = HeaderMap::new();
        of(ChannelKind::OpenAi)
            .authenticate(&key, &mut headers)
            .unwrap();
        assert_eq!(headers[header::AUTHORIZATION], "Bearer sk-1");
        assert!(headers[header::AUTHORIZATION].is_sensitive());
        let mut headers = HeaderMap::new();
        let provider = of(ChannelKind::Anthropic);
        provider.authenticate(&key, &mut headers).unwrap();
        provider.required_headers(&mut headers);
        assert_eq!(
            (&headers["x-api-key"], &headers["anthropic-version"]),
            (
                &"sk-1".parse::<HeaderValue>().unwrap(),
                &"2023-06-01".parse::<HeaderValue>().unwrap()
            )
        );
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", HeaderValue::from_static("2024-01-01"));
        provider.required_headers(&mut headers);
        assert_eq!(
            headers["anthropic-version"], "2024-01-01",
            "the client's version is kept"
        );
        let bad = Secret::new("sk\n1");
        assert_eq!(
            of(ChannelKind::OpenAi)
                .authenticate(&bad, &mut headers)
                .unwrap_err()
                .code,
            crate::routing::outcome::ChannelFault::InvalidKey
        );
    }

    #[test]
    fn paths_go_under_the_base_url() {
        let provider = of(ChannelKind::OpenAi);
        let target = Target::default();
        assert_eq!(
            provider.path_and_query("/v1", "/v1/chat/completions?x=1", &target),
            "/v1/chat/completions?x=1"
        );
        assert_eq!(
            provider.path_and_query("/api/paas/v4", "/v1/chat/completions", &target),
            "/api/paas/v4/chat/completions"
        );
        assert_eq!(provider.path_and_query("", "/other", &target), "/other");
    }

    #[test]
    fn azure_uses_deployment_paths_and_api_version() {
        let provider = of(ChannelKind::Azure);
        let target = Target {
            model: "gpt4o-prod",
            stream: true,
            api_version: "2024-10-21",
        };
        let rows = [
            (
                "/v1/chat/completions",
                "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21",
            ),
            (
                "/v1/embeddings?x=1&api-version=evil",
                "/openai/deployments/gpt4o-prod/embeddings?api-version=2024-10-21&x=1",
            ),
        ];
        for (client, want) in rows {
            assert_eq!(
                provider.path_and_query("", client, &target),
                want,
                "{client}"
            );
        }
        let odd = Target {
            model: "a/../b?c",
            ..target
        };
        assert_eq!(
            provider.path_and_query("/base", "/v1/chat/completions", &odd),
            "/base/openai/deployments/a%2F..%2Fb%3Fc/chat/completions?api-version=2024-10-21"
        );
        let none = Target {
            model: "",
            ..target
        };
        assert_eq!(
            provider.path_and_query("", "/v1/files", &none),
            "/openai/files?api-version=2024-10-21"
        );
        let mut headers = HeaderMap::new();
        provider
            .authenticate(&Secret::new("az-1"), &mut headers)
            .unwrap();
        assert_eq!(headers["api-key"], "az-1");
        assert!(headers["api-key"].is_sensitive() && !headers.contains_key(header::AUTHORIZATION));
    }

    #[test]
    fn gemini_names_the_model_and_method_in_the_path() {
        let provider = of(ChannelKind::Gemini);
        let mut target = Target {
            model: "gemini-2.5-flash",
            stream: false,
            api_version: "",
        };
        assert_eq!(
            provider.path_and_query("/v1beta", "/v1/chat/completions", &target),
            "/v1beta/models/gemini-2.5-flash:generateContent"
        );
        target.stream = true;
        assert_eq!(
            provider.path_and_query("/v1beta", "/v1/messages", &target),
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        target.model = "models/gemini-pro";
        assert_eq!(
            provider.path_and_query("", "", &target),
            "/models/gemini-pro:streamGenerateContent?alt=sse"
        );
        target.model = "";
        assert_eq!(
            provider.path_and_query("/v1beta", "/v1/models", &target),
            "/v1beta/models",
            "the probe lists models"
        );
        let mut headers = HeaderMap::new();
        provider
            .authenticate(&Secret::new("AIza1"), &mut headers)
            .unwrap();
        assert_eq!(headers["x-goog-api-key"], "AIza1");
        assert!(headers["x-goog-api-key"].is_sensitive());
    }
}
