//! The pooled upstream HTTP client (rustls, HTTP/2 by ALPN, TCP_NODELAY) and the channel-kind
//! adapters that build each upstream request (R1.2, R1.3, R13.4, R14.3, R14.5).
//!
//! Architecture Invariant: the upstream URL is built only from the channel's configured base
//! URL; nothing in a request can choose the host (R14.3). Redirects are never followed.

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

use crate::config::model::{Channel, ChannelKind};
use crate::routing::policy::TransportKind;
use crate::secret::Secret;

pub type UpstreamBody = Full<Bytes>;

/// Install ring as the process-wide rustls provider (exactly one provider; see ECOSYSTEM-NOTES).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[derive(Clone, Debug)]
pub struct Upstream {
    client: Client<HttpsConnector<HttpConnector>, UpstreamBody>,
}

impl Upstream {
    pub fn new() -> Result<Upstream, std::io::Error> {
        install_crypto_provider();
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(1024)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(https);
        Ok(Upstream { client })
    }

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

/// Build the upstream request for `o` (the channel-kind adapter, R1.2).
pub fn build(o: Outgoing<'_>) -> Result<Request<UpstreamBody>, String> {
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
        .map_err(|e| format!("invalid upstream uri: {e}"))?;
    let mut b = Request::builder().method(o.method).uri(uri);
    let headers = b.headers_mut().ok_or("request builder failed")?;
    super::headers::to_upstream(o.client_headers, headers, ch.forward_organization);
    match (ch.kind, o.key) {
        (ChannelKind::OpenAi, Some(k)) => {
            let v = HeaderValue::try_from(format!("Bearer {}", k.expose()))
                .map_err(|_| "channel key is not a valid header value")?;
            headers.insert(header::AUTHORIZATION, mark_sensitive(v));
        }
        (ChannelKind::Anthropic, Some(k)) => {
            let v = HeaderValue::try_from(k.expose())
                .map_err(|_| "channel key is not a valid header value")?;
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
    super::headers::channel_headers(ch, headers)?;
    if !o.body.is_empty() && !headers.contains_key(header::CONTENT_TYPE) {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    b.body(Full::new(o.body))
        .map_err(|e| format!("invalid upstream request: {e}"))
}

fn mark_sensitive(mut v: HeaderValue) -> HeaderValue {
    v.set_sensitive(true);
    v
}
