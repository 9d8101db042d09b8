//! How transport failures of the HTTP/1.1 client are classified (B-log-truth): a
//! refused connection is `Connect`, a connection reset after the request was sent is
//! `Reset` (labelled `reset`, never `connect`). And the HTTP/1.1 pool is kept per serving
//! thread.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use tokio::io::AsyncReadExt;

use super::*;

fn post(addr: std::net::SocketAddr) -> Request<UpstreamBody> {
    Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/v1/chat/completions"))
        .body(Full::new(Bytes::from_static(b"{}")))
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
