//! TLS (R13.4): the client listener serves rustls when `tls` is set, and upstream TLS is
//! always verified — a self-signed upstream fails the attempt; no option skips verification.
use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Pem {
    cert_der: CertificateDer<'static>,
    key_der: PrivateKeyDer<'static>,
    cert_pem: String,
    key_pem: String,
}

fn self_signed() -> Pem {
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    Pem {
        cert_der: ck.cert.der().clone(),
        key_der: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der())),
        cert_pem: ck.cert.pem(),
        key_pem: ck.signing_key.serialize_pem(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client listener speaks TLS with the configured certificate; a client that trusts only
/// that certificate completes the handshake and gets an HTTP answer; plain HTTP gets nothing.
#[tokio::test]
async fn the_client_listener_serves_tls() {
    let mocks = mocks(&["a"]).await;
    let pem = self_signed();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, &pem.cert_pem).unwrap();
    std::fs::write(&key, &pem.key_pem).unwrap();
    let yaml = fill(
        &format!(
            "tls:\n  cert: {}\n  key: {}\nchannels:\n{}{CLIENTS}",
            cert.display(),
            key.display(),
            channel("a", "{a}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_in(dir, &yaml).await;
    let addr = gw.base.trim_start_matches("http://").to_string();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem.cert_der.clone()).unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let conn = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let tcp = TcpStream::connect(&addr).await.unwrap();
    let mut tls = conn
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake with the configured certificate");
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {ALICE}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("chat.completion"), "{text}");
    assert_eq!(mocks["a"].calls(), 1);

    // Plain HTTP on the TLS port is not answered as HTTP.
    let mut plain = TcpStream::connect(&addr).await.unwrap();
    plain
        .write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), plain.read_to_end(&mut out)).await;
    assert!(!String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
    gw.stop().await;
}

/// An https upstream with a self-signed certificate: the handshake is refused by the
/// gateway (verification cannot be skipped), the attempt is a transport error → 502.
#[tokio::test]
async fn upstream_tls_is_always_verified() {
    let pem = self_signed();
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![pem.cert_der.clone()], pem.key_der.clone_key())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let handshakes = Arc::new(AtomicUsize::new(0));
    let (a2, h2) = (accepted.clone(), handshakes.clone());
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            a2.fetch_add(1, Ordering::SeqCst);
            let (acc, h) = (acceptor.clone(), h2.clone());
            tokio::spawn(async move {
                if let Ok(mut s) = acc.accept(s).await {
                    h.fetch_add(1, Ordering::SeqCst);
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    let body = r#"{"id":"x","object":"chat.completion","choices":[]}"#;
                    let resp = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                    let _ = s.write_all(resp.as_bytes()).await;
                }
            });
        }
    });
    let yaml = format!(
        "routing:\n  retry_times: 0\nchannels:\n{}{CLIENTS}",
        channel("tls", &format!("https://localhost:{port}"), 0, &["m"])
    );
    let gw = start_gw(&yaml).await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 502, "{:?}", response.text().await);
    assert!(
        accepted.load(Ordering::SeqCst) >= 1,
        "the upstream was contacted"
    );
    assert_eq!(
        handshakes.load(Ordering::SeqCst),
        0,
        "an unverified handshake completed"
    );
    gw.stop().await;
}
