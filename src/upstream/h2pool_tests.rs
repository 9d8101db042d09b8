//! The HTTP/2 pool against a real local h2 server: the peer's stream limit decides when a
//! second connection opens, a dial that never completes is bounded, and an HTTP/2
//! channel's health probe speaks HTTP/2.

use std::sync::atomic::AtomicUsize;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

use super::*;

fn pool() -> H2Pool {
    super::super::install_crypto_provider();
    let h2 = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http2()
        .wrap_connector(super::super::tcp_connector());
    H2Pool::new(h2)
}

/// An h2c server advertising `max_streams`; each request reports its arrival and waits for a
/// permit of `gate`. Returns its address and the count of accepted connections.
async fn server(
    max_streams: u32,
    gate: Arc<Semaphore>,
    arrived: mpsc::UnboundedSender<()>,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (gate, arrived) = (gate.clone(), arrived.clone());
            let svc = service_fn(move |_req| {
                let (gate, arrived) = (gate.clone(), arrived.clone());
                async move {
                    let _ = arrived.send(());
                    let _permit = gate.acquire().await;
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::new())))
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .max_concurrent_streams(max_streams)
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    (addr, accepted)
}

fn get(addr: std::net::SocketAddr) -> Request<UpstreamBody> {
    Request::builder()
        .uri(format!("http://{addr}/x"))
        .body(UpstreamBody::default())
        .unwrap()
}

/// A server that allows 2 streams per connection: the third concurrent request opens a
/// second connection instead of queueing on the first behind the server's limit.
#[tokio::test]
async fn the_peers_stream_limit_opens_a_second_connection() {
    let gate = Arc::new(Semaphore::new(0));
    let (tx, mut arrived) = mpsc::unbounded_channel();
    let (addr, accepted) = server(2, gate.clone(), tx).await;
    let pool = Arc::new(pool());
    let mut sent = Vec::new();
    for i in 0..3 {
        let p = pool.clone();
        sent.push(tokio::spawn(
            async move { p.send(get(addr)).await.map(|_| ()) },
        ));
        let got = tokio::time::timeout(Duration::from_secs(5), arrived.recv()).await;
        assert!(
            matches!(got, Ok(Some(()))),
            "request {i} reached the server"
        );
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "two connections of two streams"
    );
    gate.add_permits(3);
    for s in sent {
        assert!(s.await.unwrap().is_ok());
    }
}

/// A host that accepts TCP but never completes TLS: the dial fails after DIAL_TIMEOUT as a
/// connect failure instead of holding the request (and, before, every request to the host).
#[tokio::test(start_paused = true)]
async fn a_dial_that_never_completes_is_bounded() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let pool = pool();
    let req = Request::builder()
        .uri(format!("https://{addr}/x"))
        .body(UpstreamBody::default())
        .unwrap();
    let started = tokio::time::Instant::now();
    let timed = tokio::time::timeout(DIAL_TIMEOUT * 3, pool.send(req)).await;
    assert!(
        matches!(timed, Ok(Err(TransportKind::Connect))),
        "bounded dial: {:?}",
        timed.map(|x| x.map(|_| ()))
    );
    assert!(started.elapsed() <= DIAL_TIMEOUT + Duration::from_secs(1));
}

/// The health probe of a `protocol: http2` channel speaks HTTP/2: against an h2-only
/// (h2c prior knowledge) upstream it gets the answer; over HTTP/1 it got none.
#[tokio::test]
async fn the_probe_of_an_http2_channel_speaks_http2() {
    let gate = Arc::new(Semaphore::new(100));
    let (tx, _arrived) = mpsc::unbounded_channel();
    let (addr, _) = server(10, gate, tx).await;
    let yaml = format!(
        "channels:\n  h2:\n    kind: openai\n    base_url: http://{addr}/v1\n    keys: [k]\n    models: [m]\n    protocol: http2\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::config::load_text(&yaml, &dir.path().join("c.yaml")).unwrap();
    let up = crate::upstream::Upstream::new().unwrap();
    let got = crate::upstream::list_models(&up, &cfg.channels[0], 0, Duration::from_secs(5)).await;
    assert_eq!(got, Some(200));
}
