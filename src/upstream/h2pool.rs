//! HTTP/2 upstream connections for channels with `protocol: http2`: several connections per
//! upstream host, each carrying at most [`MAX_STREAMS_PER_CONN`] requests at once.
//!
//! A pool with one connection per host (hyper's legacy client under ALPN h2) queues every
//! request past the server's `SETTINGS_MAX_CONCURRENT_STREAMS` inside `send`, where it hits
//! the header gate and fails over from a healthy provider; and one GOAWAY cuts every stream to
//! that host. Here a request takes a stream slot on the least-busy open connection that has
//! room, and a new connection is opened when none has. A slot is held until the response body
//! is dropped (see [`Slot`]), so long streams count for as long as they run.
//!
//! B-bounded-resources: a connection carries at most the peer's current
//! `SETTINGS_MAX_CONCURRENT_STREAMS` (read by its connection task) and never more than
//! [`MAX_STREAMS_PER_CONN`]; choosing a slot takes a short lock that is never held across a
//! dial, so requests with room never wait behind a new connection; dials to one host are
//! one at a time and bounded by [`DIAL_TIMEOUT`] (TCP, TLS and the HTTP/2 handshake).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower_service::Service;

use crate::routing::policy::TransportKind;
use crate::upstream::UpstreamBody;

/// Requests carried at once by one connection. Providers advertise 100–250 concurrent
/// streams; staying at the low end never waits on the server's limit.
pub const MAX_STREAMS_PER_CONN: usize = 100;

/// Bound on opening one connection: TCP connect, TLS and the HTTP/2 handshake.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

struct Conn {
    tx: http2::SendRequest<UpstreamBody>,
    inflight: AtomicUsize,
    /// The peer's `SETTINGS_MAX_CONCURRENT_STREAMS` as its connection task last saw it.
    peer_max: Arc<AtomicUsize>,
}

impl Conn {
    fn capacity(&self) -> usize {
        self.peer_max
            .load(Ordering::Acquire)
            .clamp(1, MAX_STREAMS_PER_CONN)
    }

    fn has_room(&self) -> bool {
        self.inflight.load(Ordering::Acquire) < self.capacity()
    }
}

/// One request's place on a connection; released when dropped (with the response body).
pub struct Slot(Arc<Conn>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Default)]
struct Host {
    /// Open connections; locked only to choose or add one, never across an await.
    conns: Mutex<Vec<Arc<Conn>>>,
    /// One dial at a time per host (requests that find room never take it).
    dial: tokio::sync::Mutex<()>,
}

impl Host {
    /// A slot on the least-busy open connection with room.
    fn take(&self) -> Option<Slot> {
        let mut conns = crate::lock::lock(&self.conns);
        conns.retain(|c| !c.tx.is_closed());
        let conn = conns
            .iter()
            .filter(|conn| conn.has_room())
            .min_by_key(|conn| conn.inflight.load(Ordering::Acquire))
            .cloned()?;
        conn.inflight.fetch_add(1, Ordering::AcqRel);
        Some(Slot(conn))
    }

    fn add(&self, conn: Arc<Conn>) -> Slot {
        conn.inflight.fetch_add(1, Ordering::AcqRel);
        crate::lock::lock(&self.conns).push(conn.clone());
        Slot(conn)
    }
}

/// The HTTP/2 connections of every `protocol: http2` upstream host.
pub struct H2Pool {
    connector: HttpsConnector<HttpConnector>,
    hosts: Mutex<HashMap<String, Arc<Host>>>,
}

impl H2Pool {
    pub fn new(connector: HttpsConnector<HttpConnector>) -> H2Pool {
        H2Pool {
            connector,
            hosts: Mutex::new(HashMap::new()),
        }
    }

    fn host(&self, uri: &Uri) -> Arc<Host> {
        let key = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.as_str())
        );
        let mut hosts = crate::lock::lock(&self.hosts);
        hosts.entry(key).or_default().clone()
    }

    /// Send `req` on a connection with a free stream slot, opening one when none has room.
    pub async fn send(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<(Response<Incoming>, Slot), TransportKind> {
        let host = self.host(req.uri());
        let slot = match host.take() {
            Some(s) => s,
            None => self.dial_slot(&host, req.uri()).await?,
        };
        let mut tx = slot.0.tx.clone();
        tx.ready().await.map_err(|_| TransportKind::Reset)?;
        let resp = tx
            .send_request(req)
            .await
            .map_err(|_| TransportKind::Reset)?;
        Ok((resp, slot))
    }

    /// A slot on a new connection (or on one another dial of this host opened meanwhile).
    async fn dial_slot(&self, host: &Host, uri: &Uri) -> Result<Slot, TransportKind> {
        let _one_dial = host.dial.lock().await;
        if let Some(s) = host.take() {
            return Ok(s);
        }
        let conn = tokio::time::timeout(DIAL_TIMEOUT, self.connect(uri.clone()))
            .await
            .map_err(|_| TransportKind::Connect)??;
        Ok(host.add(Arc::new(conn)))
    }

    async fn connect(&self, uri: Uri) -> Result<Conn, TransportKind> {
        let mut connector = self.connector.clone();
        let io = connector
            .call(uri)
            .await
            .map_err(|e| super::connect_error(&format!("{e:?}")))?;
        let (tx, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(20))
            .handshake(io)
            .await
            .map_err(|_| TransportKind::Connect)?;
        let peer_max = Arc::new(AtomicUsize::new(MAX_STREAMS_PER_CONN));
        let seen = peer_max.clone();
        tokio::spawn(async move {
            let mut conn = Box::pin(conn);
            // The connection, polled here so the peer's stream limit is read as it changes.
            let ended = std::future::poll_fn(|cx| {
                let poll = conn.as_mut().poll(cx);
                seen.store(conn.current_max_send_streams(), Ordering::Release);
                poll
            })
            .await;
            if let Err(e) = ended {
                tracing::debug!(error = %e, "upstream h2 connection ended");
            }
        });
        Ok(Conn {
            tx,
            inflight: AtomicUsize::new(0),
            peer_max,
        })
    }
}

#[cfg(test)]
#[path = "h2pool_tests.rs"]
mod tests;
