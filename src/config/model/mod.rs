//! The validated, typed configuration: what `config::load` produces and `routing::compile` consumes.
//!
//! Every field here has already been checked; nothing downstream re-validates or parses strings.

mod channel;
pub mod status_set;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use regex::Regex;

pub use crate::config::model::channel::{
    BaseUrl, Channel, ChannelKind, MaxTokensChoice, ReasoningChoice, ResponsesMode, StreamPolicy,
    UpstreamProtocol,
};
use crate::config::model::status_set::StatusSet;
use crate::secret::Secret;

#[derive(Debug, Clone)]
pub struct Config {
    /// The file this was loaded from (for messages).
    pub source: PathBuf,
    pub listen: SocketAddr,
    pub tls: Option<TlsFiles>,
    pub admin: Admin,
    pub storage: Storage,
    /// Live state shared by several replicas (R17).
    pub shared: Shared,
    pub debug_headers: bool,
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub routing: Routing,
    pub auto_groups: Vec<Arc<str>>,
    /// Effective global resilience (built-in defaults overlaid with the global block).
    pub resilience: Resilience,
    pub auto_disable: AutoDisable,
    pub images_failover: ImagesFailover,
    /// Sorted by name (names are unique).
    pub channels: Vec<Channel>,
    pub virtual_models: Vec<VirtualModel>,
    pub affinity: Affinity,
    /// Sorted by name.
    pub clients: Vec<Client>,
    pub pricing: BTreeMap<String, Price>,
    pub tasks: Tasks,
    /// `telemetry:` (R20.1): OTLP traces.
    pub telemetry: Telemetry,
}

/// `telemetry:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Telemetry {
    /// None: no traces are exported (`telemetry.otlp.endpoint` unset or empty).
    pub otlp: Option<Otlp>,
}

/// `telemetry.otlp.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// OTLP/HTTP, protobuf bodies (the collector's port 4318).
    HttpProtobuf,
    /// OTLP/gRPC (the collector's port 4317).
    Grpc,
}

/// `telemetry.otlp:` OTLP traces, protobuf over HTTP or gRPC.
#[derive(Debug, Clone, PartialEq)]
pub struct Otlp {
    /// `http/protobuf`: the traces URL, the configured endpoint with `/v1/traces` appended
    /// unless its path already ends with it. `grpc`: the receiver's base URL.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    /// Sent with every export (e.g. an `authorization` header of a hosted backend).
    pub headers: Vec<(String, Secret)>,
    /// 0.0 ..= 1.0: the share of requests without a sampled parent that are traced.
    pub sample_ratio: f64,
    pub service_name: String,
}

/// `shared:` (R17). Without `redis` every replica keeps its own live state.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    /// `redis://[user:password@]host:port[/db]` (a secret: it may carry a password).
    pub redis: Option<Secret>,
    /// Replicas in the deployment (≥ 1): rate limits are divided by this while Redis is
    /// unreachable.
    pub replicas: u32,
    /// PostgreSQL unreachable: serve quota-limited clients from the last known balance.
    pub fail_open: bool,
}

#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Admin {
    pub listen: SocketAddr,
    /// None: /admin/* answers 401 to everyone (metrics/healthz/readyz stay open).
    pub token: Option<Secret>,
    /// Read-only token for `GET /status` and `/status.json` (the admin token works too).
    pub status_token: Option<Secret>,
}

#[derive(Debug, Clone)]
pub struct Storage {
    /// A file path, or ":memory:" (SQLite; unused when `url` is set).
    pub path: String,
    /// `postgres://…`: durable state in PostgreSQL, shared by several replicas (R17).
    pub url: Option<Secret>,
    /// How long a PostgreSQL precharge stays owned by its replica without a renewal; past
    /// it a surviving replica settles the books (refunds it).
    pub lease_ttl: Duration,
    /// Writes that may wait for the writer; beyond, request-log entries are dropped.
    pub queue_capacity: usize,
    /// PostgreSQL connections per replica for reads and quota debits (`storage.pool_size`).
    pub pool_size: usize,
    /// Bound on getting one of them and on a request-path statement (`storage.pool_timeout`).
    pub pool_timeout: Duration,
    /// Most concurrent quota debits of one client taken in one transaction
    /// (`storage.debit_batch`; 1 = one statement per debit).
    pub debit_batch: usize,
    /// Request-log retention (applies live on reload).
    pub request_log: RequestLogRetention,
}

/// How much request log is kept; the oldest rows are pruned in small batches by the store
/// writer, off the request path. Ledger rows older than `max_age` are folded into their
/// client's totals (never dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLogRetention {
    /// Zero = kept forever.
    pub max_age: Duration,
    /// Zero = no row limit.
    pub max_rows: u64,
}

impl Default for RequestLogRetention {
    fn default() -> Self {
        RequestLogRetention {
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_rows: 1_000_000,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_body_bytes: u64,
    pub header_read_timeout: Duration,
    pub max_connections: usize,
    /// A connection with nothing in flight is closed after this long (HTTP/2 gets a GOAWAY).
    pub idle_timeout: Duration,
    /// Concurrent connections from one client address; 0 = no per-address cap.
    pub max_connections_per_ip: usize,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub upstream_header: Duration,
    pub image_upstream_header: Duration,
    pub first_byte: Duration,
    pub keepalive: Duration,
    pub non_stream: Duration,
    pub request_deadline: Duration,
    pub drain: Duration,
    /// After the commit point, upstream silence that ends the attempt as a cut (0 = off).
    pub stream_stall: Duration,
    /// Before the commit point, the floor on a stream's first tokens per second (0 = off):
    /// a slower stream fails over like a first-byte timeout.
    pub min_tokens_per_second: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierWalk {
    Exhaust,
    OnePerTier,
}

impl TierWalk {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            TierWalk::Exhaust => "exhaust",
            TierWalk::OnePerTier => "one_per_tier",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Routing {
    pub retry_times: u32,
    pub tier_walk: TierWalk,
    pub failover_on: StatusSet,
    pub never_failover_on: StatusSet,
    pub retry_budget: RetryBudget,
    /// How weighted draws pick among a channel's keys and a tier's channels (R15.3).
    pub balance: Balance,
    /// The longest an upstream's rate-limit answer may hold one of its keys back (R15.3).
    pub max_upstream_cooldown: Duration,
    /// Error codes (of a 400) that say the request does not fit the model: never resent to
    /// the same upstream model, failed over to a target with another one.
    pub failover_on_codes: Vec<String>,
    /// A 429 whose Retry-After is at most this long is waited out on the same target
    /// (0 = fail over at once).
    pub wait_retry_after: Duration,
}

/// `routing.balance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    /// Configured weights as written.
    Weight,
    /// Each weight scaled by the remaining fraction of its key's tightest limit.
    Capacity,
    /// Power of two choices over each (channel, model)'s moving latency and error score,
    /// the weights as priors (R19.1).
    Latency,
}

impl Balance {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Balance::Weight => "weight",
            Balance::Capacity => "capacity",
            Balance::Latency => "latency",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RetryBudget {
    pub ratio: f64,
    pub min_per_second: u32,
    pub ttl: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resilience {
    pub retry: Retry,
    pub circuit_breaker: Breaker,
    pub cooldown: Cooldown,
    pub stream_resume: StreamResume,
    /// `resilience.active_probe` (R19.2).
    pub active_probe: ActiveProbe,
    /// `resilience.hedge` (R19.3).
    pub hedge: Hedge,
}

/// `resilience.hedge` (R19.3, opt-in): a request safe to send twice (R10.1) whose first
/// byte has not come `after` the send also goes to the plan's next target; the first to
/// commit wins, the other is cancelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Hedge {
    pub enabled: bool,
    /// The fixed delay; with `p95`, the delay until the target has enough samples.
    pub after: Duration,
    /// `after: p95`: the 95th percentile of the target's recent times to first byte.
    pub p95: bool,
    /// Hedges per request (each one extra attempt in flight beside the current one).
    pub max_extra: u32,
    /// Hedges allowed per first attempt over the last 10 s (no hedge storms).
    pub budget_ratio: f64,
}

/// `resilience.active_probe` (R19.2): while a breaker of the channel is open or half-open,
/// or the channel cools down, the gateway probes it itself every `interval` with a minimal
/// real request, and closes the breaker (ends the cooldown) on success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveProbe {
    pub enabled: bool,
    pub interval: Duration,
    /// The upstream model a provider-scope probe asks for; empty = the channel's first
    /// model (mapped). A model breaker's probe asks for its own model.
    pub model: String,
}

/// `resilience.stream_resume` (R18.2): continue a text stream cut after its commit point
/// on the next target, the text already delivered sent as an assistant prefill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamResume {
    pub enabled: bool,
    /// Resumes per request.
    pub max: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub max_retries: u32,
    pub retry_on: StatusSet,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub backoff_factor: f64,
    pub jitter_factor: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerScope {
    Provider,
    Model,
}

impl BreakerScope {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerScope::Provider => "provider",
            BreakerScope::Model => "model",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Breaker {
    pub enabled: bool,
    pub scope: BreakerScope,
    pub failure_on: StatusSet,
    pub failure_threshold: u32,
    pub success_threshold: u32,
    pub timeout: Duration,
    /// Zero = off.
    pub slow_call_threshold: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cooldown {
    /// Zero = off.
    pub consecutive_retryable_failures: u32,
    pub duration: Duration,
}

#[derive(Debug, Clone)]
pub struct AutoDisable {
    pub enabled: bool,
    pub auto_enable: bool,
    pub statuses: StatusSet,
    pub error_codes: Vec<String>,
    pub error_types: Vec<String>,
    pub keywords: Vec<String>,
    pub probe_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct ImagesFailover {
    pub enabled: bool,
    pub include_ambiguous: bool,
    pub include_uncertain: bool,
    pub key_retry_budget: u32,
}

#[derive(Debug, Clone)]
pub struct VirtualModel {
    pub name: String,
    pub targets: Vec<Target>,
    pub groups: Vec<String>,
    /// `virtual_models.*.stream_resume`, over `resilience.stream_resume`; `None` = not set.
    pub stream_resume: Option<StreamResume>,
}

#[derive(Debug, Clone)]
pub struct Target {
    pub channel: String,
    pub model: String,
}

#[derive(Debug, Clone)]
pub enum AffinityKey {
    /// `body.<json path>`, split on '.'.
    Body(Vec<String>),
    /// `header.<name>`.
    Header(HeaderName),
}

#[derive(Debug, Clone)]
pub struct AffinityRule {
    pub name: String,
    pub model: Regex,
    pub path: String,
    pub key: AffinityKey,
    pub ttl: Duration,
    pub skip_retry_on_failure: bool,
}

#[derive(Debug, Clone)]
pub struct Sticky {
    pub conversation_ttl: Duration,
    pub session_ttl: Duration,
    pub user_model_ttl: Duration,
    pub bucket_ttl: Duration,
}

#[derive(Debug, Clone)]
pub struct Affinity {
    /// When the file has no `affinity.rules`, the two defaults of R8.1.
    pub rules: Vec<AffinityRule>,
    pub sticky: Sticky,
}

#[derive(Debug, Clone)]
pub enum ClientKey {
    Plain(Secret),
    Sha256([u8; 32]),
}

#[derive(Debug, Clone)]
pub struct Client {
    /// Shared with every request's log record (no copy per request).
    pub name: Arc<str>,
    pub key: ClientKey,
    /// A group name, or "auto"; shared like `name`.
    pub group: Arc<str>,
    pub cross_group_retry: bool,
    /// None = unlimited.
    pub quota: Option<u64>,
    pub trusted: bool,
    /// Effective rate limits (R15.1): the client's own, each field defaulted from its
    /// group's `groups.NAME.limits`. All zero = unlimited.
    pub limits: ClientLimits,
    /// Its `switchyard_client_in_flight` gauge, registered on first use and kept for the
    /// config generation (no registry lookup and label allocation per request).
    pub in_flight_gauge: LazyGauge,
}

/// A metric handle looked up once, on first use.
#[derive(Clone, Default)]
pub struct LazyGauge(std::sync::OnceLock<metrics::Gauge>);

impl LazyGauge {
    /// The handle; `register` runs on the first call only.
    pub fn get(&self, register: impl FnOnce() -> metrics::Gauge) -> &metrics::Gauge {
        self.0.get_or_init(register)
    }
}

impl std::fmt::Debug for LazyGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LazyGauge")
    }
}

/// A client's limits (`clients.NAME.limits`, defaulted from `groups.NAME.limits`).
/// 0 = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientLimits {
    /// Requests per minute.
    pub rpm: u64,
    /// Requests per day (a sliding 24 h window).
    pub rpd: u64,
    /// Input + output tokens per minute.
    pub tpm: u64,
    /// Requests in flight, streamed responses included.
    pub concurrency: u32,
}

/// One upstream key's published limits (`channels.NAME.limits`, per key). 0 = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyLimits {
    pub rpm: u64,
    pub tpm: u64,
    pub concurrency: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Per million cache-read prompt tokens; `None` = the input price.
    pub cache_read: Option<f64>,
    /// Per million cache-write (cache creation) prompt tokens; `None` = the input price.
    pub cache_write: Option<f64>,
    /// Output tokens the estimate assumes when a request names no limit, and the limit the
    /// gateway then sends upstream for quota- and tpm-limited clients; `None` =
    /// [`DEFAULT_MAX_TOKENS`].
    pub max_output: Option<u64>,
}

/// Completion tokens the estimate assumes when the body names no limit.
pub const DEFAULT_MAX_TOKENS: u64 = 1024;

/// Async task relay (R10.5): which `/v1/*` paths are task submissions / follow-ups.
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    /// Path prefixes (e.g. `/v1/videos`) whose POST submits a task and whose
    /// `GET <prefix>/{id}` polls it.
    pub paths: Vec<String>,
}
