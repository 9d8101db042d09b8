//! The upstream HTTP clients (rustls, TCP_NODELAY): a pooled HTTP/1.1 client, and the HTTP/2
//! pool for `protocol: http2` channels; and the channel-kind adapters that build each upstream
//! request (R1.2, R1.3, R13.4, R14.3, R14.5).
//!
//! Architecture Invariant: the upstream URL is built only from the channel's configured base
//! URL; nothing in a request can choose the host (R14.3). Redirects are never followed.

pub mod body;
mod h2pool;
pub mod read;

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::config::model::{Channel, ChannelKind, UpstreamProtocol};
use crate::routing::policy::TransportKind;
use crate::secret::Secret;
use crate::upstream::body::UpBody;
use crate::upstream::h2pool::H2Pool;

pub type UpstreamBody = Full<Bytes>;

/// Install ring as the process-wide rustls provider (exactly one provider; see ECOSYSTEM-NOTES).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[derive(Clone)]
pub struct Upstream {
    client: Client<HttpsConnector<HttpConnector>, UpstreamBody>,
    h2: std::sync::Arc<H2Pool>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").finish_non_exhaustive()
    }
}

fn tcp_connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.enforce_http(false);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    http.set_keepalive(Some(Duration::from_secs(60)));
    http
}

impl Upstream {
    pub fn new() -> Result<Upstream, std::io::Error> {
        install_crypto_provider();
        // `protocol: http1` (the default) offers only HTTP/1.1 in ALPN: an h2 connection
        // shared by every request to a host is what `protocol: http2` manages explicitly.
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp_connector());
        let h2 = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http2()
            .wrap_connector(tcp_connector());
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(1024)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        Ok(Upstream {
            client,
            h2: std::sync::Arc::new(H2Pool::new(h2)),
        })
    }

    /// Send one attempt to `ch` over the channel's protocol.
    pub async fn send_for(
        &self,
        ch: &Channel,
        req: Request<UpstreamBody>,
    ) -> Result<Response<UpBody>, TransportKind> {
        match ch.protocol {
            UpstreamProtocol::Http1 => Ok(self.send(req).await?.map(|b| UpBody::new(b, None))),
            UpstreamProtocol::Http2 => {
                let (resp, slot) = self.h2.send(req).await?;
                Ok(resp.map(|b| UpBody::new(b, Some(slot))))
            }
        }
    }

    /// Send over the pooled HTTP/1.1 client.
    pub async fn send(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, TransportKind> {
        self.client
            .request(req)
            .await
            .map_err(|e| classify_error(&e))
    }
}

/// Map a client error onto the transport kinds of the classifier.
fn classify_error(e: &hyper_util::client::legacy::Error) -> TransportKind {
    let text = format!("{e:?}").to_ascii_lowercase();
    if e.is_connect() {
        if text.contains("dns") || text.contains("resolve") {
            TransportKind::Dns
        } else if text.contains("certificate") || text.contains("tls") || text.contains("handshake")
        {
            TransportKind::Tls
        } else {
            TransportKind::Connect
        }
    } else {
        TransportKind::Reset
    }
}

/// What one upstream attempt sends.
pub struct Outgoing<'a> {
    pub channel: &'a Channel,
    pub key: Option<&'a Secret>,
    pub method: Method,
    /// The client's path and query, e.g. `/v1/chat/completions?x=1`.
    pub path_and_query: &'a str,
    pub client_headers: &'a HeaderMap,
    pub body: Bytes,
    /// Forwarded only on same-target retries and first attempts (R10.2).
    pub idempotency_key: Option<&'a HeaderValue>,
    pub request_id: &'a HeaderValue,
}

/// A request that cannot be built from the channel's configuration: a `channel:*` failure of
/// that channel (it fails over and counts for auto-disable), never the client's fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// `channel:invalid_key` (the key cannot be a header value) or `channel:invalid_request`.
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

fn invalid_request(message: String) -> BuildError {
    BuildError {
        code: "channel:invalid_request",
        message,
    }
}

fn invalid_key() -> BuildError {
    BuildError {
        code: "channel:invalid_key",
        message: "the channel key is not a valid header value".into(),
    }
}

/// Build the upstream request for `o` (the channel-kind adapter, R1.2).
pub fn build(o: Outgoing<'_>) -> Result<Request<UpstreamBody>, BuildError> {
    let ch = o.channel;
    let rest = o
        .path_and_query
        .strip_prefix("/v1")
        .unwrap_or(o.path_and_query);
    let pq = format!("{}{}", ch.base_url.path_prefix, rest);
    let uri = Uri::builder()
        .scheme(ch.base_url.scheme.clone())
        .authority(ch.base_url.authority.clone())
        .path_and_query(pq)
        .build()
        .map_err(|e| invalid_request(format!("invalid upstream uri: {e}")))?;
    let mut b = Request::builder().method(o.method).uri(uri);
    let headers = b
        .headers_mut()
        .ok_or_else(|| invalid_request("request builder failed".into()))?;
    crate::http::headers::to_upstream(o.client_headers, headers, ch.forward_organization);
    match (ch.kind, o.key) {
        (ChannelKind::OpenAi, Some(k)) => {
            let v = HeaderValue::try_from(format!("Bearer {}", k.expose()))
                .map_err(|_| invalid_key())?;
            headers.insert(header::AUTHORIZATION, mark_sensitive(v));
        }
        (ChannelKind::Anthropic, Some(k)) => {
            let v = HeaderValue::try_from(k.expose()).map_err(|_| invalid_key())?;
            headers.insert(HeaderName::from_static("x-api-key"), mark_sensitive(v));
        }
        (_, None) => {}
    }
    if ch.kind == ChannelKind::Anthropic && !headers.contains_key("anthropic-version") {
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static("2023-06-01"),
        );
    }
    if let Some(k) = o.idempotency_key {
        headers.insert(HeaderName::from_static("idempotency-key"), k.clone());
    }
    headers.insert(
        HeaderName::from_static("x-request-id"),
        o.request_id.clone(),
    );
    crate::http::headers::channel_headers(ch, headers).map_err(invalid_request)?;
    if !o.body.is_empty() && !headers.contains_key(header::CONTENT_TYPE) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    // The relay reads SSE events and JSON usage: ask for plain bytes (an upstream that
    // compresses anyway is decoded by `UpBody`). The client's own Accept-Encoding is not
    // forwarded; compression towards clients belongs to a front proxy.
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    b.body(Full::new(o.body))
        .map_err(|e| invalid_request(format!("invalid upstream request: {e}")))
}

fn mark_sensitive(mut v: HeaderValue) -> HeaderValue {
    v.set_sensitive(true);
    v
}

/// `GET {base_url}/models` on `ch` with key `key` (the health probe, R7.2, R7.3): the status,
/// or `None` on a transport failure or when no answer came within `timeout`.
pub async fn list_models(
    up: &Upstream,
    ch: &Channel,
    key: usize,
    timeout: Duration,
) -> Option<u16> {
    let rid = HeaderValue::from_static("probe");
    let req = build(Outgoing {
        channel: ch,
        key: ch.keys.get(key),
        method: Method::GET,
        path_and_query: "/v1/models",
        client_headers: &HeaderMap::new(),
        body: Bytes::new(),
        idempotency_key: None,
        request_id: &rid,
    })
    .ok()?;
    let deadline = tokio::time::Instant::now() + timeout;
    let resp = tokio::time::timeout_at(deadline, up.send(req))
        .await
        .ok()?
        .ok()?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let _ = read::read_error(&mut body, deadline).await;
    Some(status)
}
