//! What a reload tells the operator (R2.4, R13, B-reload-visibility): systemd `STATUS=`,
//! `switchyard_config_last_reload_successful` and its success timestamp, `GET /admin/config`;
//! restart-only settings warned per key while the rest applies; a renewed TLS certificate
//! re-read and used for new handshakes without a restart.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use super::binary::Proc;

use super::support::*;
use rustls_pki_types::{CertificateDer, ServerName};

/// The next datagram holding `needle` (earlier ones are skipped), within 10 s.
fn notified(sock: &UnixDatagram, needle: &str) -> String {
    let mut buf = vec![0u8; 8192];
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < end {
        if let Ok(n) = sock.recv(&mut buf) {
            let msg = String::from_utf8_lossy(&buf[..n]).to_string();
            if msg.contains(needle) {
                return msg;
            }
        }
    }
    panic!("no notification with {needle:?}");
}

async fn get(url: &str) -> String {
    reqwest::Client::new()
        .get(url)
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .unwrap_or_else(|| panic!("{series} missing:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_failed_reload_is_visible_to_systemd_metrics_and_the_admin_api() {
    let mocks = mocks(&["up"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    let good = |model: &str| {
        format!(
            "{}{}",
            head(dir.path()),
            fill(
                &format!("channels:\n{}{CLIENTS}", channel("up", "{up}", 0, &[model])),
                &mocks
            )
        )
    };
    std::fs::write(&cfg, good("m1")).unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let process = Proc::spawn(&cfg, &[("NOTIFY_SOCKET", &sock_path)]);
    let ready = notified(&sock, "READY=1");
    assert!(ready.contains("STATUS=config generation 1 live"), "{ready}");
    let watching = process.logs().into_iter().find(|l| {
        l["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("watching the config"))
    });
    assert!(watching.is_some_and(|l| l["files"].as_str().unwrap().ends_with("switchyard.yaml")));

    // From the first scrape: a successful load, every reload result at 0.
    let text = get(&format!("{}/metrics", process.admin)).await;
    assert_eq!(
        metric(&text, "switchyard_config_last_reload_successful"),
        1.0
    );
    let started = metric(
        &text,
        "switchyard_config_last_reload_success_timestamp_seconds",
    );
    assert!(started > 1.6e9, "{started}");
    for r in ["ok", "unchanged", "error"] {
        assert_eq!(
            metric(
                &text,
                &format!("switchyard_config_reload_total{{result=\"{r}\"}}")
            ),
            0.0
        );
    }

    // A broken file: systemd hears the failure and the error's first line.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    std::fs::write(
        &cfg,
        format!("{}routing: {{retry_times: lots}}\n", good("m1")),
    )
    .unwrap();
    let msg = notified(&sock, "STATUS=");
    assert!(msg.contains("READY=1"), "{msg}");
    let status = msg.lines().find(|l| l.starts_with("STATUS=")).unwrap();
    assert!(
        status.starts_with("STATUS=config reload failed, generation 1 stays live: ")
            && status.contains("routing.retry_times")
            && status.contains("\"lots\" is not a whole number"),
        "{msg}"
    );
    let text = get(&format!("{}/metrics", process.admin)).await;
    assert_eq!(
        metric(&text, "switchyard_config_last_reload_successful"),
        0.0
    );
    assert_eq!(
        metric(
            &text,
            "switchyard_config_last_reload_success_timestamp_seconds"
        ),
        started
    );
    assert_eq!(
        metric(&text, "switchyard_config_reload_total{result=\"error\"}"),
        1.0
    );
    let body: serde_json::Value =
        serde_json::from_str(&get(&format!("{}/admin/config", process.admin)).await).unwrap();
    assert_eq!(body["generation"], 1);
    assert_eq!(body["last_reload"]["result"], "error");
    assert_eq!(body["last_reload_successful"], false);
    assert!(
        body["last_reload"]["error"]
            .as_str()
            .unwrap()
            .contains("routing.retry_times"),
        "{body}"
    );
    assert!(body["loaded_at"].as_str().unwrap().ends_with('Z'), "{body}");

    // Fixed: success again, and the success timestamp moves.
    std::fs::write(&cfg, good("m2")).unwrap();
    let msg = notified(&sock, "STATUS=");
    assert!(msg.contains("STATUS=config generation 2 live"), "{msg}");
    let text = get(&format!("{}/metrics", process.admin)).await;
    assert_eq!(
        metric(&text, "switchyard_config_last_reload_successful"),
        1.0
    );
    assert!(
        metric(
            &text,
            "switchyard_config_last_reload_success_timestamp_seconds"
        ) > started
    );
    let body: serde_json::Value =
        serde_json::from_str(&get(&format!("{}/admin/config", process.admin)).await).unwrap();
    assert_eq!(
        (
            body["generation"].as_u64(),
            body["last_reload"]["error"].is_null()
        ),
        (Some(2), true),
        "{body}"
    );

    // SIGHUP on an unchanged file: said so, no new generation.
    Command::new("kill")
        .args(["-HUP", &process.child.id().to_string()])
        .status()
        .unwrap();
    let msg = notified(&sock, "STATUS=");
    assert!(
        msg.contains("STATUS=config generation 2 live; file unchanged"),
        "{msg}"
    );
    let body: serde_json::Value =
        serde_json::from_str(&get(&format!("{}/admin/config", process.admin)).await).unwrap();
    assert_eq!(
        body["reloads"],
        serde_json::json!({"ok": 1, "unchanged": 1, "error": 1}),
        "{body}"
    );
    let logs = process.lines.lock().unwrap().join("\n");
    assert!(logs.contains("config reload rejected"), "{logs}");
}

#[tokio::test]
async fn restart_only_settings_are_warned_per_key_and_the_rest_applies() {
    let mocks = mocks(&["up"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    let body = |model: &str| {
        fill(
            &format!("channels:\n{}{CLIENTS}", channel("up", "{up}", 0, &[model])),
            &mocks,
        )
    };
    std::fs::write(&cfg, format!("{}{}", head(dir.path()), body("m1"))).unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let process = Proc::spawn(&cfg, &[("NOTIFY_SOCKET", &sock_path)]);
    notified(&sock, "READY=1");
    let base = process.base.clone();
    let moved = head(dir.path())
        .replace("listen: 127.0.0.1:0\nadmin", "listen: 127.0.0.1:1\nadmin")
        .replace("switchyard.db", "elsewhere.db");
    // Written aside and renamed into place: a plain write is truncate-then-write, and a
    // watcher that reads between the two (a loaded machine) sees an empty file — another
    // test's subject (reload::a_plain_write_reloads_once), not this one's.
    let next = dir.path().join("switchyard.yaml.next");
    std::fs::write(
        &next,
        format!("{moved}limits: {{max_connections: 7}}\n{}", body("m2")),
    )
    .unwrap();
    std::fs::rename(&next, &cfg).unwrap();
    let msg = notified(&sock, "STATUS=");
    assert!(
        msg.contains("STATUS=config generation 2 live; restart needed for: listen, limits.max_connections, storage.path"),
        "{msg}"
    );
    // The rest applied, on the listener that is still the old one.
    let http = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "m2", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(http.status(), 200);
    let body: serde_json::Value =
        serde_json::from_str(&get(&format!("{}/admin/config", process.admin)).await).unwrap();
    assert_eq!(
        body["restart_required"],
        serde_json::json!(["listen", "limits.max_connections", "storage.path"])
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logs = process.lines.lock().unwrap().clone();
    for key in ["listen", "limits.max_connections", "storage.path"] {
        let warned = logs.iter().any(|l| {
            let body: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            body["level"] == "WARN"
                && body["key"] == key
                && body["message"].as_str().unwrap_or("").contains("restart")
        });
        assert!(warned, "no warning for {key}:\n{}", logs.join("\n"));
    }
    assert!(!dir.path().join("elsewhere.db").exists());
}

struct Pem {
    der: CertificateDer<'static>,
    cert: String,
    key: String,
}

fn cert() -> Pem {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    Pem {
        der: ck.cert.der().clone(),
        cert: ck.cert.pem(),
        key: ck.signing_key.serialize_pem(),
    }
}

/// The certificate the gateway presents to a new handshake.
async fn presented(addr: &str, trust: &[&Pem]) -> Option<CertificateDer<'static>> {
    let mut roots = rustls::RootCertStore::empty();
    for p in trust {
        roots.add(p.der.clone()).unwrap();
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .ok()?;
    tls.get_ref()
        .1
        .peer_certificates()
        .map(|c| c[0].clone().into_owned())
}

/// Write a file the way certificate renewers do: a temporary file renamed over it.
fn replace(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn a_renewed_certificate_is_served_without_a_restart() {
    let mocks = mocks(&["up"]).await;
    let (a, b, c) = (cert(), cert(), cert());
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &a.cert).unwrap();
    std::fs::write(&key, &a.key).unwrap();
    let yaml = fill(
        &format!(
            "tls: {{cert: {}, key: {}}}\nchannels:\n{}{CLIENTS}",
            crt.display(),
            key.display(),
            channel("up", "{up}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_in(dir, &yaml).await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let all = [&a, &b, &c];
    assert_eq!(presented(&addr, &all).await, Some(a.der.clone()));

    replace(&key, &b.key);
    replace(&crt, &b.cert);
    let mut served = None;
    for _ in 0..100 {
        served = presented(&addr, &all).await;
        if served.as_ref() == Some(&b.der) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        served,
        Some(b.der.clone()),
        "renewed certificate not served"
    );
    assert_eq!(
        gw.running.as_ref().unwrap().gateway.generation(),
        1,
        "no table swap needed"
    );
    let (_, v) = gw.admin_get("/admin/config").await;
    assert!(v["tls_reloaded_at"].is_string(), "{v}");

    // A certificate that does not fit its key is refused; the good one stays.
    replace(&crt, &c.cert);
    let mut refused = false;
    for _ in 0..100 {
        let (_, v) = gw.admin_get("/admin/config").await;
        if v["last_reload"]["result"] == "error" {
            assert!(
                v["last_reload"]["error"]
                    .as_str()
                    .unwrap()
                    .contains("does not fit"),
                "{v}"
            );
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "mismatched pair not reported");
    assert_eq!(presented(&addr, &all).await, Some(b.der.clone()));
    gw.stop().await;
}
