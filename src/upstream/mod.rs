//! The upstream side: the HTTP clients (rustls, TCP_NODELAY) — the HTTP/1.1 pool (`h1pool`,
//! one per serving thread) and the HTTP/2 pool for `protocol: http2` channels (`h2pool`) —
//! the request of one attempt (`build`, with the provider kinds of `provider`), and the
//! upstream body as the relay reads it (`body`, `read`) (R1.2, R1.3, R13.4, R14.3, R14.5).
//! Redirects are never followed.

pub mod body;
mod build;
mod h1pool;
mod h2pool;
pub mod provider;
pub mod read;
pub mod request_body;

pub use build::{build, BuildError, Outgoing};

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue};
use http::{Method, Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;

use crate::config::model::{Channel, UpstreamProtocol};
use crate::http::cores;
use crate::routing::policy::TransportKind;
use crate::upstream::body::{Lease, UpBody};
use crate::upstream::h1pool::H1Pool;
use crate::upstream::h2pool::H2Pool;

pub use request_body::UpstreamBody;

/// Install ring as the process-wide rustls provider (exactly one provider; see ECOSYSTEM-NOTES).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[derive(Clone)]
pub struct Upstream {
    /// The HTTP/1.1 pools, one per serving thread (`http::cores::slot`; slot 0 for every
    /// other thread), each made at its first use: a pooled connection's task runs on the
    /// runtime that opened it, so a request that took a connection from another thread's
    /// pool would wake that thread twice (request out, answer back).
    clients: std::sync::Arc<[std::sync::Arc<H1Pool>]>,
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
        Ok(Upstream {
            clients: (0..=cores::MAX)
                .map(|_| std::sync::Arc::new(H1Pool::new(https.clone())))
                .collect(),
            h2: std::sync::Arc::new(H2Pool::new(h2)),
        })
    }

    /// This thread's HTTP/1.1 pool.
    fn client(&self) -> &std::sync::Arc<H1Pool> {
        let slot = cores::slot().min(self.clients.len() - 1);
        &self.clients[slot]
    }

    /// Send one attempt to `ch` over the channel's protocol.
    pub async fn send_for(
        &self,
        ch: &Channel,
        req: Request<UpstreamBody>,
    ) -> Result<Response<UpBody>, TransportKind> {
        match ch.protocol {
            UpstreamProtocol::Http1 => self.send(req).await,
            UpstreamProtocol::Http2 => {
                // Boxed: the HTTP/2 pool's ~6 KB of state would otherwise be part of every
                // request's future, HTTP/1 ones included (a performance measure).
                let (resp, slot) = Box::pin(self.h2.send(req)).await?;
                Ok(resp.map(|b| UpBody::new(b, Some(Lease::H2(slot)))))
            }
        }
    }

    /// Send over this serving thread's HTTP/1.1 pool; the answer's body holds the
    /// connection until it is dropped.
    pub async fn send(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<Response<UpBody>, TransportKind> {
        let (resp, lent) = self.client().send(req).await?;
        Ok(resp.map(|b| UpBody::new(b, Some(Lease::H1(lent)))))
    }
}

/// The kind of a failed connection, from its error text: name resolution, TLS, or the
/// connection itself.
pub(crate) fn connect_error(text: &str) -> TransportKind {
    let text = text.to_ascii_lowercase();
    if text.contains("dns") || text.contains("resolve") {
        TransportKind::Dns
    } else if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
        TransportKind::Tls
    } else {
        TransportKind::Connect
    }
}

/// `GET {base_url}/models` on `ch` with key `key` (the health probe, R7.2, R7.3) over the
/// channel's own `protocol` (B-bounded-resources: an HTTP/2 channel is probed over HTTP/2): the
/// status, or `None` on a transport failure or when no answer came within `timeout`.
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
        target: Default::default(),
        client_headers: &HeaderMap::new(),
        body: UpstreamBody::default(),
        idempotency_key: None,
        traceparent: None,
        request_id: &rid,
    })
    .ok()?;
    status_within(up, ch, req, timeout).await
}

/// Send a request the gateway makes for itself (a health or active probe) and drain its
/// answer: the status, or `None` on a transport failure or when no answer came within
/// `timeout`.
pub async fn status_within(
    up: &Upstream,
    ch: &Channel,
    req: http::Request<UpstreamBody>,
    timeout: Duration,
) -> Option<u16> {
    let deadline = tokio::time::Instant::now() + timeout;
    let resp = tokio::time::timeout_at(deadline, up.send_for(ch, req))
        .await
        .ok()?
        .ok()?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let _ = read::read_error(&mut body, deadline).await;
    Some(status)
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod transport_tests;
