//! HTTP/1.1 upstream connections for channels with `protocol: http1` (the default): idle
//! keep-alive connections per upstream host, one pool per serving thread, on hyper's
//! `client::conn::http1`.
//!
//! A request takes an idle connection of its host, or opens one; the connection is lent with
//! the answer's body ([`Lent`]) and goes back to the pool when the body is dropped, if it has
//! read the whole answer (hyper then has the connection ready for the next request); else it
//! is closed. Nothing is spawned per request and no connection crosses threads: a pool's
//! connections are driven by the runtime of the serving thread that opened them.
//!
//! A pooled connection the upstream closed while it sat idle is found closed when taken and
//! dropped; one found closed only as the request is written gives the request back unsent,
//! and the request goes out on the next connection (the pool's, else a new one): an idle
//! connection's close is never an attempt's failure. A request that was written and then lost
//! its connection is the attempt's `reset` (the classifier decides, R5).
//!
//! B-bounded-resources: at most [`MAX_IDLE_PER_HOST`] idle connections per host, each kept at
//! most [`IDLE_TIMEOUT`]; expired and closed ones are swept when the pool is next used.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::uri::{Authority, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::rt;
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tower_service::Service;

use crate::fastmap::FastMap;
use crate::routing::policy::TransportKind;
use crate::upstream::UpstreamBody;

/// Idle connections kept per upstream host.
pub const MAX_IDLE_PER_HOST: usize = 1024;

/// How long a connection may sit idle in the pool.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How often the whole pool is swept of expired and closed connections (when it is used).
const SWEEP_EVERY: Duration = Duration::from_secs(30);

type Sender = http1::SendRequest<UpstreamBody>;

/// An upstream host: its scheme and authority.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key(Scheme, Authority);

struct Idle {
    tx: Sender,
    since: Instant,
}

impl Idle {
    fn usable(&self, now: Instant) -> bool {
        !self.tx.is_closed() && now.saturating_duration_since(self.since) < IDLE_TIMEOUT
    }
}

/// One upstream host's idle connections and its `Host` header value, built once (a clone
/// shares its bytes).
#[derive(Default)]
struct Host {
    conns: Vec<Idle>,
    value: Option<HeaderValue>,
}

#[derive(Default)]
struct Hosts {
    /// By host; one lookup a request, with a fast seeded hash (the keys are the configured
    /// upstream hosts, not client input).
    idle: FastMap<Key, Host>,
    swept: Option<Instant>,
}

impl Hosts {
    /// Drop every expired or closed connection and every host left with none.
    fn sweep(&mut self, now: Instant) {
        for host in self.idle.values_mut() {
            host.conns.retain(|c| c.usable(now));
        }
        self.idle.retain(|_, host| !host.conns.is_empty());
        self.swept = Some(now);
    }

    fn sweep_due(&mut self, now: Instant) {
        if self
            .swept
            .is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY)
        {
            self.sweep(now);
        }
    }
}

/// The idle HTTP/1.1 connections of one serving thread.
pub struct H1Pool {
    connector: HttpsConnector<HttpConnector>,
    hosts: Mutex<Hosts>,
}

/// A connection lent to one answer: back to its pool when dropped if it can take another
/// request (the answer was read to its end), else closed.
pub struct Lent {
    pool: Arc<H1Pool>,
    key: Option<Key>,
    tx: Option<Sender>,
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let (Some(key), Some(tx)) = (self.key.take(), self.tx.take()) {
            if tx.is_ready() {
                self.pool.put(key, tx);
            }
        }
    }
}

impl H1Pool {
    pub fn new(connector: HttpsConnector<HttpConnector>) -> H1Pool {
        H1Pool {
            connector,
            hosts: Mutex::new(Hosts::default()),
        }
    }

    /// An idle connection to `key`'s host that can take a request now, and (`host`) the
    /// host's `Host` header value.
    fn take(&self, key: &Key, host: bool) -> (Option<Sender>, Option<HeaderValue>) {
        let now = crate::clock::instant().into_std();
        let mut hosts = crate::lock::lock(&self.hosts);
        hosts.sweep_due(now);
        // A key clone is a reference count (its bytes are shared), cheaper than a second hash.
        let entry = hosts.idle.entry(key.clone()).or_default();
        let value = if host {
            if entry.value.is_none() {
                entry.value = host_value(&key.0, &key.1);
            }
            entry.value.clone()
        } else {
            None
        };
        while let Some(c) = entry.conns.pop() {
            if c.usable(now) && c.tx.is_ready() {
                return (Some(c.tx), value);
            }
        }
        (None, value)
    }

    fn put(&self, key: Key, tx: Sender) {
        let now = crate::clock::instant().into_std();
        let mut hosts = crate::lock::lock(&self.hosts);
        hosts.sweep_due(now);
        let host = hosts.idle.entry(key).or_default();
        if host.conns.len() < MAX_IDLE_PER_HOST {
            host.conns.push(Idle { tx, since: now });
        }
    }

    /// Send `req` (an absolute URI) on an idle connection of its host, or on a new one.
    pub async fn send(
        self: &Arc<Self>,
        mut req: Request<UpstreamBody>,
    ) -> Result<(Response<Incoming>, Lent), TransportKind> {
        // The URI's parts are moved, not copied: the host is the pool's key, the path and
        // query the request target.
        let mut parts = std::mem::take(req.uri_mut()).into_parts();
        let (Some(scheme), Some(authority)) = (parts.scheme.take(), parts.authority.take()) else {
            return Err(TransportKind::Connect);
        };
        *req.uri_mut() = origin_form(parts.path_and_query.take());
        let key = Key(scheme, authority);
        let mut wants_host = !req.headers().contains_key(http::header::HOST);
        loop {
            let (idle, host) = self.take(&key, wants_host);
            if let Some(v) = host {
                req.headers_mut().insert(http::header::HOST, v);
                wants_host = false;
            }
            let (mut tx, reused) = match idle {
                Some(tx) => (tx, true),
                None => (self.dial(&key).await?, false),
            };
            match tx.try_send_request(req).await {
                Ok(resp) => {
                    let lent = Lent {
                        pool: self.clone(),
                        key: Some(key),
                        tx: Some(tx),
                    };
                    return Ok((resp, lent));
                }
                Err(mut e) => match e.take_message() {
                    // Not written: the idle connection had closed. The next one takes it.
                    Some(unsent) if reused => req = unsent,
                    _ => return Err(TransportKind::Reset),
                },
            }
        }
    }

    /// Open a connection to `key`'s host; its task runs on this thread's runtime.
    async fn dial(&self, key: &Key) -> Result<Sender, TransportKind> {
        let uri = Uri::builder()
            .scheme(key.0.clone())
            .authority(key.1.clone())
            .path_and_query("/")
            .build()
            .map_err(|_| TransportKind::Connect)?;
        let mut connector = self.connector.clone();
        let io = connector
            .call(uri)
            .await
            .map_err(|e| super::connect_error(&format!("{e:?}")))?;
        let (tx, conn) = http1::handshake(UpIo::from(io))
            .await
            .map_err(|_| TransportKind::Connect)?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "upstream connection ended");
            }
        });
        Ok(tx)
    }
}

/// An upstream connection's stream with its TLS state boxed: a connection's task holds its
/// stream for its life, and rustls' state (a few KB) would otherwise size every
/// connection's task, plain ones included (held streams: BENCHMARKS.md, eighth stop).
enum UpIo {
    Plain(TokioIo<TcpStream>),
    Tls(Box<MaybeHttpsStream<TokioIo<TcpStream>>>),
}

impl From<MaybeHttpsStream<TokioIo<TcpStream>>> for UpIo {
    fn from(io: MaybeHttpsStream<TokioIo<TcpStream>>) -> UpIo {
        match io {
            MaybeHttpsStream::Http(plain) => UpIo::Plain(plain),
            tls => UpIo::Tls(Box::new(tls)),
        }
    }
}

/// Call through to the stream, pinned (both are `Unpin`).
macro_rules! each {
    ($io:expr, $s:ident => $call:expr) => {
        match $io {
            UpIo::Plain(plain) => {
                let $s = Pin::new(plain);
                $call
            }
            UpIo::Tls(tls) => {
                let $s = Pin::new(&mut **tls);
                $call
            }
        }
    };
}

impl rt::Read for UpIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self.get_mut(), s => s.poll_read(cx, buf))
    }
}

impl rt::Write for UpIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), s => s.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), s => s.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self.get_mut(), s => s.poll_shutdown(cx))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            UpIo::Plain(plain) => plain.is_write_vectored(),
            UpIo::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self.get_mut(), s => s.poll_write_vectored(cx, bufs))
    }
}

/// The `Host` a request to this URI sends: the host, and the port unless it is the scheme's
/// default.
pub(super) fn host_value(scheme: &Scheme, authority: &Authority) -> Option<HeaderValue> {
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    let value = match authority.port_u16() {
        Some(p) if p != default_port => HeaderValue::from_str(&format!("{}:{p}", authority.host())),
        _ => HeaderValue::from_str(authority.host()),
    };
    value.ok()
}

/// The request target an origin server expects: the path and query only.
fn origin_form(pq: Option<http::uri::PathAndQuery>) -> Uri {
    match pq {
        Some(pq) if pq.as_str() != "/" => {
            let mut parts = http::uri::Parts::default();
            parts.path_and_query = Some(pq);
            Uri::from_parts(parts).unwrap_or_default()
        }
        _ => Uri::default(),
    }
}
