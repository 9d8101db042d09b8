//! An OpenAI-like upstream that answers per API key: the keys it is given are rate limited
//! (429 with `Retry-After: 2`, `x-ratelimit-*` headers and OpenAI's `rate_limit_exceeded`
//! error body, as OpenAI sends them), every other key gets a normal chat completion. It
//! counts the requests each key made.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub struct KeyedUpstream {
    addr: std::net::SocketAddr,
    hits: Arc<Mutex<HashMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KeyedUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const LIMITED: &str = r#"{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 2s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
const OK: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#;

impl KeyedUpstream {
    pub async fn start(limited: &[&str]) -> KeyedUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let limited: Arc<Vec<String>> = Arc::new(limited.iter().map(|s| s.to_string()).collect());
        let h = hits.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (h, limited) = (h.clone(), limited.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (h, limited) = (h.clone(), limited.clone());
                        async move { Ok::<_, Infallible>(answer(&req, &h, &limited)) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(sock), svc)
                        .await;
                });
            }
        });
        KeyedUpstream { addr, hits, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests made with `key`.
    pub fn hits(&self, key: &str) -> usize {
        self.hits.lock().unwrap().get(key).copied().unwrap_or(0)
    }
}

fn answer(
    req: &Request<hyper::body::Incoming>,
    hits: &Mutex<HashMap<String, usize>>,
    limited: &[String],
) -> Response<Full<Bytes>> {
    let key = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_string();
    *hits.lock().unwrap().entry(key.clone()).or_default() += 1;
    let builder = Response::builder().header("content-type", "application/json");
    if limited.contains(&key) {
        builder
            .status(429)
            .header("retry-after", "2")
            .header("x-ratelimit-limit-requests", "3")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-ratelimit-reset-requests", "2s")
            .body(Full::new(Bytes::from_static(LIMITED.as_bytes())))
            .unwrap()
    } else {
        builder
            .status(200)
            .body(Full::new(Bytes::from_static(OK.as_bytes())))
            .unwrap()
    }
}
