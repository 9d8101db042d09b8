//! How transport failures of the HTTP/1.1 client are classified (B-log-truth): a
//! refused connection is `Connect`, a connection reset after the request was sent is
//! `Reset` (labelled `reset`, never `connect`).

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
