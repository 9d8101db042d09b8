//! The client listener: accept loop, connection cap, TCP_NODELAY, optional TLS, header read
//! timeout, HTTP/1.1 + h2c, and graceful drain on shutdown (R13.2, R13.4, R14.2).

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;

use super::gateway::Gateway;
use super::handler::handle;
use super::sniff::Sniffed;
use crate::telemetry;

/// Build a TLS acceptor from PEM files (R13.4).
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    super::upstream::install_crypto_provider();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{}: cannot read certificate: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: bad certificate PEM: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("{}: cannot read private key: {e}", key.display()))?;
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS configuration rejected: {e}"))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}

const OVERLOADED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 105\r\nconnection: close\r\n\r\n{\"error\":{\"message\":\"the gateway is at its connection limit; retry shortly\",\"type\":\"overloaded_error\"}}\r\n";

/// Serve clients on `listener` until `shutdown` turns true, then drain for up to `drain`.
pub async fn serve(
    listener: TcpListener,
    gw: Arc<Gateway>,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    let max = gw.snapshot().table.config.limits.max_connections;
    let permits = Arc::new(Semaphore::new(max));
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, _peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics::counter!(telemetry::CONNECTIONS_REJECTED).increment(1);
            tokio::spawn(reject(stream));
            continue;
        };
        let gw2 = gw.clone();
        let header_timeout = gw.snapshot().table.config.limits.header_read_timeout;
        let svc = service_fn(move |req| {
            let gw = gw2.clone();
            async move { Ok::<_, Infallible>(handle(gw, req).await) }
        });
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .max_buf_size(256 * 1024);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_header_list_size(64 * 1024);
        let watcher = graceful.watcher();
        let tls = tls.clone();
        metrics::gauge!(telemetry::CONNECTIONS).increment(1.0);
        tokio::spawn(async move {
            match tls {
                None => {
                    let io = TokioIo::new(Sniffed::new(stream));
                    let conn = builder.serve_connection_with_upgrades(io, svc);
                    let _ = watcher.watch(conn.into_owned()).await;
                }
                Some(acc) => {
                    let handshake = tokio::time::timeout(header_timeout, acc.accept(stream)).await;
                    if let Ok(Ok(s)) = handshake {
                        let io = TokioIo::new(Sniffed::new(s));
                        let conn = builder.serve_connection_with_upgrades(io, svc);
                        let _ = watcher.watch(conn.into_owned()).await;
                    }
                }
            }
            metrics::gauge!(telemetry::CONNECTIONS).decrement(1.0);
            drop(permit);
        });
    }
    drop(listener);
    let drain = gw.snapshot().table.config.timeouts.drain;
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain,
            "drain timeout reached; closing remaining connections"
        );
    }
}

async fn reject(mut s: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), s.write_all(OVERLOADED)).await;
    let _ = s.shutdown().await;
}
