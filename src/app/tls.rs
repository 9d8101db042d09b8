//! The client listener's certificate, re-read on reload (R13.4, B-reload-visibility): the
//! handshake config resolves the certificate through a [`CertStore`], whose key is swapped
//! atomically like the routing table, so a renewed certificate needs no restart. Handshakes
//! already done keep the certificate they started with.

use std::path::Path;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;

use crate::config::model::TlsFiles;

/// The live certificate and key, and a fingerprint of the files they were read from.
pub struct CertStore {
    live: ArcSwap<CertifiedKey>,
    read_from: Mutex<[u8; 32]>,
}

impl std::fmt::Debug for CertStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CertStore")
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.live.load_full())
    }
}

/// The certificate file's bytes, the key file's bytes, and a fingerprint of both.
type Read = (Vec<u8>, Vec<u8>, [u8; 32]);

/// The bytes of both files and their fingerprint.
fn read(files: &TlsFiles) -> Result<Read, String> {
    let rd = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| format!("tls.{what} {}: cannot read: {e}", p.display()))
    };
    let cert = rd(&files.cert, "cert")?;
    let key = rd(&files.key, "key")?;
    let mut hasher = Sha256::new();
    hasher.update(files.cert.as_os_str().as_encoded_bytes());
    hasher.update([0]);
    hasher.update(&cert);
    hasher.update([0]);
    hasher.update(files.key.as_os_str().as_encoded_bytes());
    hasher.update([0]);
    hasher.update(&key);
    Ok((cert, key, hasher.finalize().into()))
}

fn certified(files: &TlsFiles, cert: &[u8], key: &[u8]) -> Result<CertifiedKey, String> {
    crate::upstream::install_crypto_provider();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            format!(
                "tls.cert {}: not a PEM certificate: {e}",
                files.cert.display()
            )
        })?;
    if chain.is_empty() {
        return Err(format!(
            "tls.cert {}: no certificate in the file",
            files.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
        format!(
            "tls.key {}: not a PEM private key: {e}",
            files.key.display()
        )
    })?;
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        format!(
            "tls: the key {} does not fit the certificate {}: {e}",
            files.key.display(),
            files.cert.display()
        )
    })
}

impl CertStore {
    /// Read `files` and build the acceptor that serves from the new store.
    pub fn open(files: &TlsFiles) -> Result<(Arc<CertStore>, TlsAcceptor), String> {
        let (cert, key, fp) = read(files)?;
        let store = Arc::new(CertStore {
            live: ArcSwap::from_pointee(certified(files, &cert, &key)?),
            read_from: Mutex::new(fp),
        });
        let mut cfg = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_cert_resolver(store.clone());
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok((store, TlsAcceptor::from(Arc::new(cfg))))
    }

    /// True when the files differ from those last loaded (or cannot be read).
    pub fn changed(&self, files: &TlsFiles) -> bool {
        let last = *crate::lock::lock(&self.read_from);
        read(files).map_or(true, |(_, _, fp)| fp != last)
    }

    /// Re-read `files`; a changed, valid pair is swapped in. `Ok(true)` when swapped. On
    /// error the previous certificate stays.
    pub fn refresh(&self, files: &TlsFiles) -> Result<bool, String> {
        let (cert, key, fp) = read(files)?;
        let mut last = crate::lock::lock(&self.read_from);
        if *last == fp {
            return Ok(false);
        }
        let ck = certified(files, &cert, &key)?;
        self.live.store(Arc::new(ck));
        *last = fp;
        Ok(true)
    }
}
