//! HTTP/2 upstream connections for channels with `protocol: http2`: several connections per
//! upstream host, each carrying at most [`MAX_STREAMS_PER_CONN`] requests at once.
//!
//! A pool with one connection per host (hyper's legacy client under ALPN h2) queues every
//! request past the server's `SETTINGS_MAX_CONCURRENT_STREAMS` inside `send`, where it hits
//! the header gate and fails over from a healthy provider; and one GOAWAY cuts every stream to
//! that host. Here a request takes a stream slot on the least-busy open connection that has
//! room, and a new connection is opened when none has. A slot is held until the response body
//! is dropped (see [`Slot`]), so long streams count for as long as they run.

use std::collections::HashMap;
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

struct Conn {
    tx: http2::SendRequest<UpstreamBody>,
    inflight: AtomicUsize,
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
    conns: Vec<Arc<Conn>>,
}

/// The HTTP/2 connections of every `protocol: http2` upstream host.
pub struct H2Pool {
    connector: HttpsConnector<HttpConnector>,
    hosts: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Host>>>>,
}

impl H2Pool {
    pub fn new(connector: HttpsConnector<HttpConnector>) -> H2Pool {
        H2Pool {
            connector,
            hosts: Mutex::new(HashMap::new()),
        }
    }

    fn host(&self, uri: &Uri) -> Arc<tokio::sync::Mutex<Host>> {
        let key = format!(
            "{}://{}",
            uri.scheme_str().unwrap_or("http"),
            uri.authority().map_or("", |a| a.as_str())
        );
        let mut hosts = crate::sync::lock(&self.hosts);
        hosts.entry(key).or_default().clone()
    }

    /// Send `req` on a connection with a free stream slot, opening one when none has room.
    pub async fn send(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<(Response<Incoming>, Slot), TransportKind> {
        let host = self.host(req.uri());
        let slot = {
            let mut h = host.lock().await;
            h.conns.retain(|c| !c.tx.is_closed());
            let free = h
                .conns
                .iter()
                .filter(|c| c.inflight.load(Ordering::Acquire) < MAX_STREAMS_PER_CONN)
                .min_by_key(|c| c.inflight.load(Ordering::Acquire))
                .cloned();
            let conn = match free {
                Some(c) => c,
                None => {
                    let c = Arc::new(self.connect(req.uri().clone()).await?);
                    h.conns.push(c.clone());
                    c
                }
            };
            conn.inflight.fetch_add(1, Ordering::AcqRel);
            Slot(conn)
        };
        let mut tx = slot.0.tx.clone();
        tx.ready().await.map_err(|_| TransportKind::Reset)?;
        let resp = tx
            .send_request(req)
            .await
            .map_err(|_| TransportKind::Reset)?;
        Ok((resp, slot))
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
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "upstream h2 connection ended");
            }
        });
        Ok(Conn {
            tx,
            inflight: AtomicUsize::new(0),
        })
    }
}
