//! How transport failures of the HTTP/1.1 client are classified (B-log-truth): a
//! refused connection is `Connect`, a connection reset after the request was sent is
//! `Reset` (labelled `reset`, never `connect`). And the HTTP/1.1 pool (`h1pool`): kept per
//! serving thread, an idle connection the upstream closed is never a failure, an answer left
//! unread closes its connection, requests leave in origin form with their `Host`.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use tokio::io::AsyncReadExt;

use super::*;

fn post(addr: std::net::SocketAddr) -> Request<UpstreamBody> {
    Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/v1/chat/completions"))
        .body(UpstreamBody::from(Bytes::from_static(b"{}")))
        .unwrap()
}

#[tokio::test]
async fn a_reset_after_the_request_was_sent_is_not_a_connect_failure() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        // The whole request arrives, then the connection is reset (RST, not FIN).
        let _ = s.read(&mut buf).await;
        s.set_zero_linger().unwrap();
        drop(s);
    });
    let up = Upstream::new().unwrap();
    let got = up.send(post(addr)).await.map(|_| ());
    assert_eq!(got, Err(TransportKind::Reset));
    assert_eq!(
        crate::routing::outcome::error_class(&crate::routing::outcome::Outcome::Transport(
            TransportKind::Reset
        )),
        "reset"
    );

    // Nothing listens: that one never reached an upstream.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = closed.local_addr().unwrap();
    drop(closed);
    assert_eq!(
        up.send(post(gone)).await.map(|_| ()),
        Err(TransportKind::Connect)
    );
}

/// An HTTP/1.1 keep-alive server answering `{}` to everything; counts its connections.
async fn counting_server() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let svc = hyper::service::service_fn(|_req| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                    Bytes::from_static(b"{}"),
                )))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc),
            );
        }
    });
    (addr, accepted)
}

/// Two requests, each read to its end (the connection goes back to the pool).
async fn two_requests(up: &Upstream, addr: std::net::SocketAddr) {
    use http_body_util::BodyExt;
    for _ in 0..2 {
        let resp = up.send(post(addr)).await.expect("answered");
        let _ = resp.into_body().collect().await.expect("body");
    }
}

/// Each serving thread keeps its own HTTP/1.1 pool (`http::cores::slot`): requests from one
/// thread share a connection; a serving thread opens its own rather than driving, from its
/// thread, a connection another thread's runtime runs.
#[tokio::test]
async fn each_serving_thread_keeps_its_own_pool() {
    use std::sync::atomic::Ordering;
    let (addr, accepted) = counting_server().await;
    let up = Upstream::new().unwrap();
    two_requests(&up, addr).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one thread, one connection"
    );
    let (finish, finished) = tokio::sync::watch::channel(false);
    let (tx, served) = tokio::sync::oneshot::channel();
    let theirs = up.clone();
    let serve = async move {
        two_requests(&theirs, addr).await;
        let _ = tx.send(());
    };
    let done = crate::http::cores::spawn(0, serve, finished).expect("thread starts");
    served.await.expect("the serving thread's requests");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the serving thread's own connection"
    );
    two_requests(&up, addr).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "this thread's pool kept its connection"
    );
    let _ = finish.send(true);
    done.await.expect("the thread ended");
}

/// A keep-alive server (raw TCP) that answers each connection's first request with `{}` and
/// then closes it, as an upstream does whose idle timeout is shorter than the pool's. Sends
/// every request head it read on `heads`.
async fn answer_once_then_close() -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (heads, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let heads = heads.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                // The head and the two-byte body `{}`.
                while !got.ends_with(b"\r\n\r\n{}") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = heads.send(String::from_utf8_lossy(&got).into_owned());
                let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                let _ = s.write_all(answer).await;
                // Closed with no `connection: close`: the client learns it from the socket.
            });
        }
    });
    (addr, rx)
}

/// An idle pooled connection the upstream closed is never an attempt's failure: the next
/// request goes out on a new connection. The request leaves in origin form with the `Host`
/// the URI names (R1.2).
#[tokio::test]
async fn an_idle_connection_the_upstream_closed_is_not_a_failure() {
    use http_body_util::BodyExt;
    let (addr, mut heads) = answer_once_then_close().await;
    let up = Upstream::new().unwrap();
    for i in 0..40 {
        let resp = up.send(post(addr)).await.unwrap_or_else(|e| {
            panic!("request {i} failed with {e:?} on a closed idle connection")
        });
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&body[..], b"{}");
        let head = heads.recv().await.expect("a head");
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("\r\nhost: {addr}\r\n")),
            "{head}"
        );
        // Every other time the upstream's close reaches the pooled connection while it is
        // idle; else the next request may find it closing as it is sent (given back unsent).
        if i % 2 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// An answer dropped before its end takes its connection with it: the next request never
/// reads the rest of someone else's answer, it opens a new connection.
#[tokio::test]
async fn an_answer_left_unread_closes_its_connection() {
    use http_body_util::BodyExt;
    use std::sync::atomic::Ordering;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            // A body of two parts, the second a while after the first.
            let svc = hyper::service::service_fn(|_req| async {
                use futures_util::StreamExt;
                let parts = futures_util::stream::iter([b"{\"a\":".as_slice(), b"1}".as_slice()])
                    .then(|p| async move {
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                        Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(
                            Bytes::from_static(p),
                        ))
                    });
                Ok::<_, std::convert::Infallible>(http::Response::new(
                    http_body_util::StreamBody::new(parts),
                ))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc),
            );
        }
    });
    let up = Upstream::new().unwrap();
    let first = up.send(post(addr)).await.expect("answered");
    drop(first);
    let second = up.send(post(addr)).await.expect("answered");
    let body = second.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(&body[..], b"{\"a\":1}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "a new connection");
    // Read to its end, the second answer's connection serves the third request.
    let third = up.send(post(addr)).await.expect("answered");
    let _ = third.into_body().collect().await.expect("body");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "the pooled connection");
}

/// `Host` names the port only when it is not the scheme's default.
#[test]
fn host_values_omit_default_ports() {
    use http::uri::{Authority, Scheme};
    let value = |scheme: Scheme, authority: &str| {
        h1pool::host_value(&scheme, &Authority::try_from(authority).unwrap())
    };
    assert_eq!(
        value(Scheme::HTTPS, "api.example:443").unwrap(),
        "api.example"
    );
    assert_eq!(
        value(Scheme::HTTP, "api.example:80").unwrap(),
        "api.example"
    );
    assert_eq!(
        value(Scheme::HTTP, "api.example:443").unwrap(),
        "api.example:443"
    );
    assert_eq!(
        value(Scheme::HTTPS, "127.0.0.1:8443").unwrap(),
        "127.0.0.1:8443"
    );
    assert_eq!(value(Scheme::HTTPS, "api.example").unwrap(), "api.example");
}

/// A TLS upstream through the pool: the connection's stream is the boxed TLS one
/// (`h1pool::UpIo::Tls`), and two requests on it (the second on the kept-alive connection)
/// each get the answer whole.
#[tokio::test]
async fn a_tls_upstream_answers_through_the_pool_twice_on_one_connection() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use http_body_util::BodyExt;
    use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio::io::AsyncWriteExt;

    super::install_crypto_provider();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let server = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 8192];
                for n in 0..2 {
                    // Each request is one small write from the client: one read takes it.
                    if tls.read(&mut buf).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let body = format!("{{\"n\":{n}}}");
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                    let _ = tls.write_all(format!("{head}{body}").as_bytes()).await;
                }
            });
        }
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    let client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client)
        .https_only()
        .enable_http1()
        .wrap_connector(super::tcp_connector());
    let pool = Arc::new(H1Pool::new(https));
    for n in 0..2 {
        let req = Request::builder()
            .method("POST")
            .uri(format!("https://localhost:{port}/v1/chat/completions"))
            .body(UpstreamBody::from(Bytes::from_static(b"{}")))
            .unwrap();
        let (resp, lent) = pool.send(req).await.expect("the TLS upstream answers");
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, format!("{{\"n\":{n}}}").as_bytes());
        drop(lent); // the connection goes back to the pool, read to its end
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one kept-alive connection"
    );
}
