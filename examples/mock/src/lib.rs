//! `switchyard-mock`: a scriptable mock LLM upstream with fault injection (OpenAI, Anthropic, Azure OpenAI and
//! Gemini wire formats),
//! served over HTTP/1.1 and h2c on a spawned task; used by integration tests, the demo and
//! the benchmarks.
//!
//! Behaviour per request: the `x-mock-fault` header if present, else the next queued
//! [`Behavior`] (see [`MockUpstream::push`]), else the default ([`MockUpstream::set_default`]).
//! Requests are validated as the real provider of the endpoint does ([`Flavour`],
//! `validate/`) and refused with its status and error body; `TOOLTEST:` / `READTEST:`
//! prompts get scripted tool loops (`script.rs`) for end-to-end runs with real clients.
mod behavior;
mod body;
mod gemini;
mod handler;
mod json;
mod reasoning;
mod request;
mod script;
mod shape;
mod sse;
mod tools;
mod validate;
mod wire;

pub use behavior::{Behavior, ParseFaultError, Wire, CHAOS};
pub use body::{MockBody, MockCut};
pub use json::{CACHED_TOKENS, CACHE_WRITE_TOKENS, DEFAULT_CHUNKS, PROMPT_TOKENS};
pub use reasoning::THOUGHT;
pub use request::DEFAULT_MODEL;
pub use script::{ANSWER_PREFIX, TOOL_COMMAND};
pub use tools::{ANTHROPIC_CALL_ID, OPENAI_CALL_ID, RESPONSES_CALL_ID};
pub use validate::Flavour;

/// The request fields each provider's API reference accepts at the top of a body, as the
/// mock's validation refuses the rest: the one list of each, for every test that checks what
/// the gateway sends.
pub mod fields {
    pub use crate::validate::anthropic::{
        BETA_FIELDS as ANTHROPIC_BETA_FIELDS, MESSAGE_FIELDS as ANTHROPIC_MESSAGES,
    };

    /// The Messages fields accepted without an `anthropic-beta` header.
    pub fn anthropic_messages_without_beta() -> Vec<&'static str> {
        ANTHROPIC_MESSAGES
            .iter()
            .copied()
            .filter(|f| !ANTHROPIC_BETA_FIELDS.iter().any(|(b, _)| b == f))
            .collect()
    }
    pub use crate::validate::gemini::{GENERATION as GEMINI_GENERATION, TOP as GEMINI_TOP};
    pub use crate::validate::openai::CHAT_FIELDS as OPENAI_CHAT;
}

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;
use http::HeaderValue;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// `SETTINGS_MAX_CONCURRENT_STREAMS` of the mock's HTTP/2 connections.
pub const MAX_CONCURRENT_STREAMS: u32 = 100;

/// Models `GET /v1/models` always lists (followed by the models seen in requests).
pub const FIXED_MODELS: &[&str] = &["mock-model", "gpt-4o-mini", "claude-3-5-haiku-latest"];

/// One request as the mock upstream received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path with query.
    pub path: String,
    /// Header names are lower case.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub arrived_at: tokio::time::Instant,
    /// The error body the provider's validation answers this request with (see
    /// [`MockUpstream::set_flavour`]); `None` when it is valid. A `status=`, `hang=` or
    /// `redirect=` behaviour is answered before validation, as a provider's front end would.
    pub refusal: Option<String>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON, when it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

#[derive(Default)]
struct Tally {
    per_path: HashMap<String, usize>,
    models: BTreeSet<String>,
}

/// State shared by the handle and the server tasks.
pub(crate) struct Shared {
    default: ArcSwap<Behavior>,
    queue: Mutex<VecDeque<Behavior>>,
    queued: AtomicUsize,
    key: ArcSwapOption<String>,
    name: ArcSwapOption<HeaderValue>,
    record: AtomicBool,
    pub(crate) validate: AtomicBool,
    flavour: AtomicU8,
    calls: AtomicUsize,
    pub(crate) disconnects: AtomicUsize,
    pub(crate) open_streams: AtomicUsize,
    recorded: Mutex<Vec<RecordedRequest>>,
    tally: Mutex<Tally>,
    video_ids: AtomicU64,
}

impl Shared {
    fn new() -> Self {
        Shared {
            default: ArcSwap::from_pointee(Behavior::Ok),
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            key: ArcSwapOption::empty(),
            name: ArcSwapOption::empty(),
            record: AtomicBool::new(true),
            validate: AtomicBool::new(true),
            flavour: AtomicU8::new(0),
            calls: AtomicUsize::new(0),
            disconnects: AtomicUsize::new(0),
            open_streams: AtomicUsize::new(0),
            recorded: Mutex::new(Vec::new()),
            tally: Mutex::new(Tally::default()),
            video_ids: AtomicU64::new(0),
        }
    }

    pub(crate) fn flavour(&self) -> Flavour {
        match self.flavour.load(Ordering::Relaxed) {
            1 => Flavour::ChatOnly,
            2 => Flavour::DeepseekThinking,
            _ => Flavour::Native,
        }
    }

    pub(crate) fn next_behavior(&self) -> Behavior {
        if self.queued.load(Ordering::Acquire) > 0 {
            let mut q = lock(&self.queue);
            if let Some(b) = q.pop_front() {
                self.queued.store(q.len(), Ordering::Release);
                return b;
            }
        }
        Behavior::clone(&self.default.load())
    }

    pub(crate) fn tally(&self, path: &str, model: Option<&str>) {
        let mut t = lock(&self.tally);
        match t.per_path.get_mut(path) {
            Some(n) => *n += 1,
            None => {
                t.per_path.insert(path.to_string(), 1);
            }
        }
        if let Some(m) = model {
            if !t.models.contains(m) {
                t.models.insert(m.to_string());
            }
        }
    }

    pub(crate) fn push_record(&self, r: RecordedRequest) {
        lock(&self.recorded).push(r);
    }

    pub(crate) fn models_json(&self) -> String {
        let t = lock(&self.tally);
        let extra = t
            .models
            .iter()
            .filter(|m| !FIXED_MODELS.contains(&m.as_str()));
        json::models(
            FIXED_MODELS
                .iter()
                .copied()
                .chain(extra.map(String::as_str)),
        )
    }

    pub(crate) fn next_video_id(&self) -> u64 {
        self.video_ids.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Stops the server when the last handle goes away.
struct Guard {
    stop: watch::Sender<bool>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Handle to a running mock upstream. Clones share the server; dropping the last clone
/// or calling [`MockUpstream::shutdown`] stops it (open connections included).
#[derive(Clone)]
pub struct MockUpstream {
    shared: Arc<Shared>,
    guard: Arc<Guard>,
    addr: SocketAddr,
}

impl std::fmt::Debug for MockUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockUpstream")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MockUpstream {
    /// Starts on 127.0.0.1 with an OS-chosen port.
    pub async fn start() -> std::io::Result<MockUpstream> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts on `addr`.
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<MockUpstream> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new());
        let (stop, rx) = watch::channel(false);
        tokio::spawn(accept_loop(listener, shared.clone(), rx));
        Ok(MockUpstream {
            shared,
            guard: Arc::new(Guard { stop }),
            addr,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Stops accepting and closes open connections.
    pub fn shutdown(&self) {
        let _ = self.guard.stop.send(true);
    }

    /// Behaviour for every request not covered by the queue or `x-mock-fault`.
    pub fn set_default(&self, b: Behavior) {
        self.shared.default.store(Arc::new(b));
    }

    /// Queues a behaviour; queued behaviours are used one per request, in order.
    pub fn push(&self, b: Behavior) {
        let mut q = lock(&self.shared.queue);
        q.push_back(b);
        self.shared.queued.store(q.len(), Ordering::Release);
    }

    /// When `Some`, requests must present this key (bearer, `x-api-key`, `api-key` or
    /// `x-goog-api-key`) or get a 401 that echoes the key they sent.
    pub fn require_key(&self, key: Option<String>) {
        self.shared.key.store(key.map(Arc::new));
    }

    /// Sets the `x-mock-name` header carried by every response. A name that is not a valid
    /// header value is ignored.
    pub fn set_name(&self, name: &str) {
        self.shared
            .name
            .store(HeaderValue::from_str(name).ok().map(Arc::new));
    }

    /// Which provider the mock plays ([`Flavour::Native`] by default: each endpoint as its
    /// own provider). Requests are validated as that provider does and refused with its
    /// status and error body.
    pub fn set_flavour(&self, f: Flavour) {
        let v = match f {
            Flavour::Native => 0,
            Flavour::ChatOnly => 1,
            Flavour::DeepseekThinking => 2,
        };
        self.shared.flavour.store(v, Ordering::Relaxed);
    }

    /// Turns the provider's request validation off (on by default, as real providers always
    /// validate): only for a test that deliberately sends what no provider accepts.
    pub fn set_validate(&self, on: bool) {
        self.shared.validate.store(on, Ordering::Relaxed);
    }

    /// Requests the provider's validation refused (their [`RecordedRequest::refusal`] set).
    pub fn refused(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.recorded)
            .iter()
            .filter(|r| r.refusal.is_some())
            .cloned()
            .collect()
    }

    /// Whether requests are kept for [`MockUpstream::requests`] (on by default; turn off
    /// for long benchmarks).
    pub fn set_record(&self, on: bool) {
        self.shared.record.store(on, Ordering::Relaxed);
    }

    /// Requests received (all paths).
    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::Relaxed)
    }

    /// Requests received on `path` (without query). A path without a leading `/` is taken
    /// relative to `/v1/`: `calls_to("chat/completions")`.
    pub fn calls_to(&self, path: &str) -> usize {
        let t = lock(&self.shared.tally);
        let get = |p: &str| t.per_path.get(p).copied().unwrap_or(0);
        if path.starts_with('/') {
            get(path)
        } else {
            get(&format!("/v1/{path}"))
        }
    }

    /// Recorded requests, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.recorded).clone()
    }

    /// Responses whose client went away before the body was fully written.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::Relaxed)
    }

    /// SSE responses currently being written.
    pub fn open_streams(&self) -> usize {
        self.shared.open_streams.load(Ordering::Relaxed)
    }

    /// Clears counters, recorded requests, the queue, the default behaviour (back to `Ok`)
    /// and the required key. The name, the flavour and the validation setting stay.
    pub fn reset(&self) {
        let s = &self.shared;
        {
            let mut q = lock(&s.queue);
            q.clear();
            s.queued.store(0, Ordering::Release);
        }
        s.default.store(Arc::new(Behavior::Ok));
        s.key.store(None);
        s.calls.store(0, Ordering::Relaxed);
        s.disconnects.store(0, Ordering::Relaxed);
        s.video_ids.store(0, Ordering::Relaxed);
        lock(&s.recorded).clear();
        *lock(&s.tally) = Tally::default();
    }
}

async fn stopped(rx: &mut watch::Receiver<bool>) {
    // An error means every handle is gone.
    let _ = rx.wait_for(|stop| *stop).await;
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut rx: watch::Receiver<bool>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Real HTTP/2 upstreams cap concurrent streams per connection (100–250).
    builder
        .http2()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let builder = Arc::new(builder);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped(&mut rx) => return,
        };
        let (sock, _) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(error = %e, "mock upstream accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let shared = shared.clone();
        let builder = builder.clone();
        let mut rx = rx.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| handler::handle(shared.clone(), req));
            let conn = builder.serve_connection(TokioIo::new(sock), svc);
            tokio::select! {
                _ = conn => {}
                _ = stopped(&mut rx) => {}
            }
        });
    }
}

/// Lock `m`, even when poisoned (a panicking test thread must not wedge the mock).
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
