//! State that follows the key, end to end (B-key-fingerprint; R7.1, R7.2): a disabled key is
//! stored by fingerprint, so removing or moving keys across a restart never disables
//! another; the probe re-tests each auto-disabled key and lifts it; disabled/enabled state
//! is persisted even when the store queue is full.
use crate::support;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use support::*;
use tokio::net::TcpListener;

/// A minimal OpenAI-style upstream that knows which keys are dead: a dead key gets the
/// real `401 invalid_api_key` error, any other key a chat answer (or a model list).
#[derive(Clone, Default)]
struct Keyed {
    dead: Arc<Mutex<HashSet<String>>>,
    /// (path, key) of every request.
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl Keyed {
    async fn start(dead: &[&str]) -> (Keyed, String) {
        let keyed = Keyed::default();
        keyed.set_dead(dead);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = keyed.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let keyed = served.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let keyed = keyed.clone();
                        async move { Ok::<_, Infallible>(keyed.answer(req)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(sock), svc)
                        .await;
                });
            }
        });
        (keyed, format!("http://{addr}/v1"))
    }

    fn set_dead(&self, dead: &[&str]) {
        *self.dead.lock().unwrap() = dead.iter().map(|s| s.to_string()).collect();
    }

    fn answer(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let key = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("")
            .to_string();
        let path = req.uri().path().to_string();
        self.seen.lock().unwrap().push((path.clone(), key.clone()));
        let (status, body) = if self.dead.lock().unwrap().contains(&key) {
            (
                401,
                format!(
                    r#"{{"error":{{"message":"Incorrect API key provided: {key}.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
                ),
            )
        } else if path.ends_with("/models") {
            (200, r#"{"object":"list","data":[{"id":"m","object":"model","created":0,"owned_by":"o"}]}"#.to_string())
        } else {
            (200, r#"{"id":"c1","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#.to_string())
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        response
            .headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        response
    }

    /// Keys used for chat calls (not probes), in order.
    fn chat_keys(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p.ends_with("/chat/completions"))
            .map(|(_, k)| k.clone())
            .collect()
    }

    fn probes_with(&self, key: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, k)| p.ends_with("/models") && k == key)
            .count()
    }

    fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

fn yaml(base: &str, keys: &[&str], extra: &str) -> String {
    let keys = keys
        .iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{extra}resilience:\n  retry:\n    max_retries: 0\nchannels:\n  kc:\n    kind: openai\n    base_url: {base}\n    keys: [{keys}]\n    models: [m]\n{CLIENTS}"
    )
}

async fn channel_json(gw: &Gw) -> Value {
    let (s, v) = gw.admin_get("/admin/channels").await;
    assert_eq!(s, 200, "{v}");
    v["channels"][0].clone()
}

async fn restart(gw: Gw, body: &str) -> Gw {
    gw.flush().await;
    let Gw { running, dir, .. } = gw;
    running.expect("running").shutdown().await;
    start_in(dir, body).await
}

/// Send chats until key `dead` has been tried once (and disabled); all of them succeed.
async fn disable_by_use(gw: &Gw, up: &Keyed, dead: &str) {
    for _ in 0..6 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
        if up.chat_keys().iter().any(|k| k == dead) {
            return;
        }
    }
    panic!("key {dead} never tried: {:?}", up.chat_keys());
}

/// B-key-fingerprint: removing dead key A from [A, B, C] must not disable B — not now, not
/// after a restart; and a disabled key stays disabled wherever it moves in the list.
#[tokio::test]
async fn a_disabled_key_follows_the_key_across_restarts() {
    let (up, base) = Keyed::start(&["k-a"]).await;
    let gw = start_gw(&yaml(&base, &["k-a", "k-b", "k-c"], "")).await;
    disable_by_use(&gw, &up, "k-a").await;
    let channel = channel_json(&gw).await;
    assert_eq!(
        channel["disabled_keys"],
        serde_json::json!([0]),
        "{channel}"
    );
    assert!(
        !channel.to_string().contains("k-a"),
        "the key itself is shown: {channel}"
    );

    // A is removed from the list, the gateway restarts: B and C both serve.
    let gw = restart(gw, &yaml(&base, &["k-b", "k-c"], "")).await;
    let channel = channel_json(&gw).await;
    assert_eq!(channel["disabled_keys"], serde_json::json!([]), "{channel}");
    assert_eq!(channel["enabled"], true, "{channel}");
    up.clear();
    for _ in 0..4 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    let used: HashSet<String> = up.chat_keys().into_iter().collect();
    assert!(used.contains("k-b") && used.contains("k-c"), "{used:?}");

    // A comes back at another position: still disabled, and only A.
    let gw = restart(gw, &yaml(&base, &["k-c", "k-a", "k-b"], "")).await;
    let channel = channel_json(&gw).await;
    assert_eq!(
        channel["disabled_keys"],
        serde_json::json!([1]),
        "{channel}"
    );
    up.clear();
    for _ in 0..6 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    assert!(
        !up.chat_keys().contains(&"k-a".to_string()),
        "{:?}",
        up.chat_keys()
    );
    gw.stop().await;
}

/// Schema v4 migration: a disabled key stored by position before the upgrade is resolved
/// against the configured keys at the next start and rewritten by fingerprint.
#[tokio::test]
async fn a_key_disabled_by_position_before_the_upgrade_is_migrated() {
    let (up, base) = Keyed::start(&[]).await;
    let body = yaml(&base, &["k-a", "k-b", "k-c"], "");
    let gw = start_gw(&body).await;
    let db = gw.dir.path().join("switchyard.db");
    gw.flush().await;
    let Gw { running, dir, .. } = gw;
    running.expect("running").shutdown().await;
    {
        let db = rusqlite::Connection::open(&db).unwrap();
        db.execute(
            "INSERT INTO channel_state (channel, key_fp, reason, ts_ms, auto) VALUES ('kc', '#1', 'upstream status 401', 1, 1)",
            [],
        )
        .unwrap();
    }
    let gw = start_in(dir, &body).await;
    let channel = channel_json(&gw).await;
    assert_eq!(
        channel["disabled_keys"],
        serde_json::json!([1]),
        "{channel}"
    );
    for _ in 0..6 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    assert!(!up.chat_keys().contains(&"k-b".to_string()));
    gw.flush().await;
    let db = rusqlite::Connection::open(&db).unwrap();
    let keys: Vec<String> = db
        .prepare("SELECT key_fp FROM channel_state WHERE channel = 'kc'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(keys[0].len(), 32, "stored by fingerprint: {keys:?}");
    // Now the list can change: the migrated state follows B.
    let gw = restart(gw, &yaml(&base, &["k-b", "k-c"], "")).await;
    assert_eq!(
        channel_json(&gw).await["disabled_keys"],
        serde_json::json!([0])
    );
    gw.stop().await;
}

/// R7.2: the probe re-tests each auto-disabled key with that key (the
/// channel itself never went down) and lifts it once the upstream accepts it again.
#[tokio::test]
async fn the_probe_lifts_one_auto_disabled_key() {
    let (up, base) = Keyed::start(&["k-a"]).await;
    let extra = "auto_disable:\n  probe_interval: 200ms\n";
    let gw = start_gw(&yaml(&base, &["k-a", "k-b"], extra)).await;
    disable_by_use(&gw, &up, "k-a").await;
    assert_eq!(
        channel_json(&gw).await["disabled_keys"],
        serde_json::json!([0])
    );
    // Still dead: probed with A itself, and not lifted.
    let mut probed = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if up.probes_with("k-a") >= 1 {
            probed = true;
            break;
        }
    }
    assert!(probed, "key A is re-tested by the probe");
    assert_eq!(
        channel_json(&gw).await["disabled_keys"],
        serde_json::json!([0])
    );
    // A works again: the next probe lifts it.
    up.set_dead(&[]);
    let mut lifted = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if channel_json(&gw).await["disabled_keys"] == serde_json::json!([]) {
            lifted = true;
            break;
        }
    }
    assert!(lifted, "the probe lifts key A");
    up.clear();
    for _ in 0..4 {
        assert_eq!(gw.chat("m", false).await.status(), 200);
    }
    assert!(
        up.chat_keys().contains(&"k-a".to_string()),
        "A serves again"
    );
    // The lift is persisted.
    let gw = restart(gw, &yaml(&base, &["k-a", "k-b"], extra)).await;
    assert_eq!(
        channel_json(&gw).await["disabled_keys"],
        serde_json::json!([])
    );
    gw.stop().await;
}

/// R7.2: an operator enable and an auto-disable made while the store queue is
/// full are still persisted (and survive a restart).
#[tokio::test]
async fn state_changes_survive_a_full_store_queue() {
    let mocks = mocks(&["dq"]).await;
    mocks["dq"].set_default(Behavior::Status {
        code: 401,
        body: None,
    });
    let body = fill(
        &format!("channels:\n{}{CLIENTS}", channel("dq", "{dq}", 0, &["m"])),
        &mocks,
    );
    let gw = start_gw(&body).await;
    // Auto-disable while the queue is full.
    let lock = jam(&gw).await;
    assert_eq!(gw.chat("m", false).await.status(), 401);
    assert_eq!(channel_json(&gw).await["enabled"], false);
    tokio::time::sleep(Duration::from_millis(100)).await;
    lock.execute_batch("ROLLBACK").unwrap();
    let gw = restart(gw, &body).await;
    assert_eq!(
        channel_json(&gw).await["enabled"],
        false,
        "the auto-disable was stored"
    );
    // Operator enable while the queue is full.
    let lock = jam(&gw).await;
    assert_eq!(gw.admin_post("/admin/channels/dq/enable").await, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    lock.execute_batch("ROLLBACK").unwrap();
    let gw = restart(gw, &body).await;
    assert_eq!(
        channel_json(&gw).await["enabled"],
        true,
        "the enable was stored"
    );
    gw.stop().await;
}
