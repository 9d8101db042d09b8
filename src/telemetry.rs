//! Every metric name, described once, and the Prometheus recorder (R12.2).
//!
//! Names follow Prometheus conventions: `switchyard_` prefix, base units, `_total` counters.
//! Label sets are bounded: channel, model, group, outcome class — never key or request id.

pub mod allocs;
pub mod otlp;
mod otlp_export;
mod quota;
mod series;
pub mod upkeep;
pub mod window;

pub use quota::{quota, QuotaMeters};
pub use series::{
    ATTEMPT_OUTCOMES, BREAKER_STATES, KEY_COOLDOWN_SOURCES, PROBE_RESULTS, STICKY_RESULTS,
    STORE_OPS, STREAM_OUTCOMES,
};

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const REQUESTS: &str = "switchyard_requests_total";
pub const REQUEST_DURATION: &str = "switchyard_request_duration_seconds";
pub const ATTEMPTS: &str = "switchyard_attempts_total";
pub const ATTEMPTS_PER_REQUEST: &str = "switchyard_attempts_per_request";
pub const FAILOVERS: &str = "switchyard_failovers_total";
pub const RETRIES: &str = "switchyard_retries_total";
pub const RETRY_BUDGET_EXHAUSTED: &str = "switchyard_retry_budget_exhausted_total";
pub const UPSTREAM_DURATION: &str = "switchyard_upstream_duration_seconds";
pub const TTFB: &str = "switchyard_time_to_first_byte_seconds";
/// R20.3: the gateway's own time in a request, upstream time excluded.
pub const OVERHEAD: &str = "switchyard_overhead_seconds";
pub const STREAMS: &str = "switchyard_streams_total";
pub const KEEPALIVES: &str = "switchyard_keepalives_total";
pub const BREAKER_STATE: &str = "switchyard_circuit_breaker_state";
pub const BREAKER_TRANSITIONS: &str = "switchyard_circuit_breaker_transitions_total";
pub const CHANNEL_DISABLED: &str = "switchyard_channel_disabled";
pub const CONFIG_RELOADS: &str = "switchyard_config_reload_total";
pub const CONFIG_GENERATION: &str = "switchyard_config_generation";
/// The names Prometheus uses for its own config.
pub const CONFIG_LAST_RELOAD_OK: &str = "switchyard_config_last_reload_successful";
pub const CONFIG_LAST_RELOAD_SUCCESS_TS: &str =
    "switchyard_config_last_reload_success_timestamp_seconds";
pub const CONNECTIONS: &str = "switchyard_connections";
/// Open client connections per serving thread (label `thread`: 1..=N; `http::spread`).
pub const SERVING_THREAD_CONNECTIONS: &str = "switchyard_serving_thread_connections";
pub const CONNECTIONS_REJECTED: &str = "switchyard_connections_rejected_total";
pub const STORE_DROPPED: &str = "switchyard_store_dropped_total";
pub const STORE_WRITTEN: &str = "switchyard_store_written_total";
pub const STORE_DISK_FULL: &str = "switchyard_store_disk_full";
pub const STORE_PRUNED: &str = "switchyard_store_pruned_total";
pub const STORE_UP: &str = "switchyard_store_up";
pub const QUOTA_LEASE_REFUNDS: &str = "switchyard_quota_lease_refunds_total";
pub const QUOTA_LEASE_LOST: &str = "switchyard_quota_lease_lost_total";
pub const QUOTA_UNAVAILABLE: &str = "switchyard_quota_unavailable_total";
pub const QUOTA_CHARGED: &str = "switchyard_quota_charged_credits_total";
pub const QUOTA_REFUNDED: &str = "switchyard_quota_refunded_credits_total";
pub const QUOTA_REJECTED: &str = "switchyard_quota_rejected_total";
/// PostgreSQL quota debits taken in batches (B-pg-pool).
pub const QUOTA_DEBIT_STATEMENTS: &str = "switchyard_quota_debit_statements_total";
pub const QUOTA_DEBITS_BATCHED: &str = "switchyard_quota_debits_total";
pub const CACHED_TOKENS: &str = "switchyard_cached_prompt_tokens_total";
pub const PROMPT_TOKENS: &str = "switchyard_prompt_tokens_total";
pub const STICKY: &str = "switchyard_sticky_total";
pub const PROBES: &str = "switchyard_probes_total";
/// Shared live state across replicas (R17).
pub const SHARED_STATE_UP: &str = "switchyard_shared_state_up";
pub const SHARED_CHANGES: &str = "switchyard_shared_changes_total";
pub const SHARED_LIMIT_FALLBACKS: &str = "switchyard_shared_limit_fallbacks_total";
pub const RATE_LIMITED: &str = "switchyard_rate_limited_total";
pub const KEY_COOLDOWNS: &str = "switchyard_upstream_key_cooldowns_total";
pub const KEYS_HELD_BACK: &str = "switchyard_upstream_keys_held_back_total";
pub const SHARED_LIMIT_RELEASES_DROPPED: &str = "switchyard_shared_limit_releases_dropped_total";
pub const CLIENT_CONCURRENCY: &str = "switchyard_client_concurrency";
pub const TRANSLATION_DROPPED: &str = "switchyard_translation_dropped_fields_total";
pub const MALFORMED_EVENTS: &str = "switchyard_stream_malformed_events_total";
pub const STREAM_RESUMES: &str = "switchyard_stream_resumes_total";
/// Active probes of open or cooling channels (R19.2).
pub const PROBE_REQUESTS: &str = "switchyard_probe_requests_total";
/// Hedged requests (R19.3).
pub const HEDGES: &str = "switchyard_hedges_total";
/// OTLP traces (R20.1).
pub const OTLP_SPANS: &str = "switchyard_otlp_spans_total";
pub const OTLP_DROPPED: &str = "switchyard_otlp_requests_dropped_total";

const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
];
/// The gateway's own time is sub-millisecond when all is well: finer buckets.
const OVERHEAD_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
];
const ATTEMPT_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0];

static HANDLE: std::sync::OnceLock<Option<PrometheusHandle>> = std::sync::OnceLock::new();

/// Install the global Prometheus recorder (once per process), describe every metric and
/// start its upkeep (`upkeep.rs`).
/// Returns the handle the admin listener renders; `None` when another recorder was installed
/// first. Several gateways in one process (tests) share the one recorder.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE.get_or_init(install_once).clone()
}

fn install_once() -> Option<PrometheusHandle> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
        .ok()?
        .set_buckets_for_metric(Matcher::Full(ATTEMPTS_PER_REQUEST.into()), ATTEMPT_BUCKETS)
        .ok()?
        .set_buckets_for_metric(Matcher::Full(OVERHEAD.into()), OVERHEAD_BUCKETS)
        .ok()?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).ok()?;
    describe();
    upkeep::start(handle.clone());
    Some(handle)
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric's HELP text, one row per metric: name, kind, unit, description.
const DESCRIPTIONS: &[(&str, Kind, Option<Unit>, &str)] = &[
    (REQUESTS, Kind::Counter, None, "Client requests by endpoint family and final status class."),
    (REQUEST_DURATION, Kind::Histogram, Some(Unit::Seconds), "Whole-request latency."),
    (ATTEMPTS, Kind::Counter, None, "Upstream attempts by channel and outcome class."),
    (ATTEMPTS_PER_REQUEST, Kind::Histogram, None, "Upstream attempts made per request."),
    (FAILOVERS, Kind::Counter, None, "Moves after a failure, by the channel left (from) and the channel tried next (to; the same channel when only the key changes)."),
    (RETRIES, Kind::Counter, None, "Same-target retries after backoff."),
    (RETRY_BUDGET_EXHAUSTED, Kind::Counter, None, "Failures returned because the retry budget was spent."),
    (UPSTREAM_DURATION, Kind::Histogram, Some(Unit::Seconds), "Upstream attempt latency to response headers."),
    (TTFB, Kind::Histogram, Some(Unit::Seconds), "Time from request start to the first byte sent to the client."),
    (OVERHEAD, Kind::Histogram, Some(Unit::Seconds), "The gateway's own time in a request: from its start to the answer's head (a stream's commit, a whole answer's handover), less the time its upstream attempts took (send to answer); backoffs and key waits between attempts count. A refused request counts whole."),
    (STREAMS, Kind::Counter, None, "Streams by outcome: complete, incomplete, client_cancel, first_byte_timeout, below_min_tokens_per_second."),
    (KEEPALIVES, Kind::Counter, None, "SSE keepalive comments sent to clients."),
    (BREAKER_STATE, Kind::Gauge, None, "Circuit breaker state per channel: 0 closed, 1 half-open, 2 open."),
    (BREAKER_TRANSITIONS, Kind::Counter, None, "Circuit breaker state transitions."),
    (CHANNEL_DISABLED, Kind::Gauge, None, "1 when a channel is disabled (manually or automatically)."),
    (CONFIG_RELOADS, Kind::Counter, None, "Config reloads by result: ok (applied), unchanged (file equals the live config), error (rejected)."),
    (CONFIG_LAST_RELOAD_OK, Kind::Gauge, None, "1 when the last config load (start-up or reload) succeeded, 0 when it was rejected."),
    (CONFIG_LAST_RELOAD_SUCCESS_TS, Kind::Gauge, Some(Unit::Seconds), "Unix time of the last successful config load (start-up or reload)."),
    (CONFIG_GENERATION, Kind::Gauge, None, "Generation number of the live routing table."),
    (CONNECTIONS, Kind::Gauge, None, "Open client connections."),
    (SERVING_THREAD_CONNECTIONS, Kind::Gauge, None, "Open client connections per serving thread (label thread: 1 to the number of serving threads); a thread that holds two more than another hands it new connections."),
    (CONNECTIONS_REJECTED, Kind::Counter, None, "Client connections refused at the connection cap (total or per address)."),
    (STORE_DROPPED, Kind::Counter, None, "Store writes dropped because the writer queue was full."),
    (STORE_WRITTEN, Kind::Counter, None, "Store writes committed."),
    (STORE_DISK_FULL, Kind::Gauge, None, "1 while the database cannot grow (disk full): request-log entries are dropped, quota-limited clients get 503."),
    (STORE_PRUNED, Kind::Counter, None, "Rows removed by retention: request_log rows deleted, ledger rows folded into their client's totals."),
    (STORE_UP, Kind::Gauge, None, "1 while the database answers (always for SQLite); 0 while PostgreSQL is unreachable."),
    (QUOTA_LEASE_REFUNDS, Kind::Counter, None, "Precharges refunded because their replica's lease expired (the replica died mid-request)."),
    (QUOTA_LEASE_LOST, Kind::Counter, None, "Settles or refunds not applied because the session was already closed by another replica after its lease expired."),
    (QUOTA_UNAVAILABLE, Kind::Counter, None, "Quota-limited requests admitted without the database (mode fail_open) or refused with 503 (fail_closed) while PostgreSQL was unreachable."),
    (QUOTA_CHARGED, Kind::Counter, None, "Credits charged (settled), by client."),
    (QUOTA_REFUNDED, Kind::Counter, None, "Credits refunded, by client."),
    (QUOTA_REJECTED, Kind::Counter, None, "Requests rejected for insufficient quota, by client."),
    (QUOTA_DEBIT_STATEMENTS, Kind::Counter, None, "Quota debit statements sent to PostgreSQL: one per batch of one client's concurrent debits."),
    (QUOTA_DEBITS_BATCHED, Kind::Counter, None, "Quota debits sent to PostgreSQL (admitted or refused); divided by the statements, the mean batch size."),
    (CACHED_TOKENS, Kind::Counter, None, "Prompt tokens served from the upstream prompt cache."),
    (PROMPT_TOKENS, Kind::Counter, None, "Prompt tokens reported by upstreams."),
    (STICKY, Kind::Counter, None, "Sticky routing lookups by key kind and result."),
    (PROBES, Kind::Counter, None, "Health probes by channel and result: ok, failed, reenabled."),
    (SHARED_STATE_UP, Kind::Gauge, None, "1 while the shared-state Redis answers (shared.redis), 0 while replicas run on local state."),
    (SHARED_CHANGES, Kind::Counter, None, "Live-state changes exchanged with other replicas, by result: published, applied, dropped (outbox full or Redis unreachable)."),
    (SHARED_LIMIT_FALLBACKS, Kind::Counter, None, "Rate-limit checks answered locally (limits divided by shared.replicas) because Redis was unreachable."),
    (SHARED_LIMIT_RELEASES_DROPPED, Kind::Counter, None, "Shared rate-limit releases and lease holds dropped because the release queue was full (the lease then expires after 30 s; the reservation stays counted)."),
    (RATE_LIMITED, Kind::Counter, None, "Client requests refused with 429 by the client's own limits, by client and limit kind (rpm, rpd, tpm, concurrency)."),
    (KEY_COOLDOWNS, Kind::Counter, None, "Upstream keys cooled by a rate-limit answer, by channel and the header the wait came from (retry-after-ms, retry-after, x-ratelimit-reset, anthropic-ratelimit-reset)."),
    (KEYS_HELD_BACK, Kind::Counter, None, "Attempts moved off an upstream key because its channels.*.limits budget was spent or it was cooling after a rate-limit answer, by channel and reason (limit, cooldown)."),
    (CLIENT_CONCURRENCY, Kind::Gauge, None, "Requests in flight per client with a concurrency limit (streams included)."),
    (TRANSLATION_DROPPED, Kind::Counter, None, "Advisory request fields a translation dropped because the target format cannot express them and their absence does not change the answer, by field (README: translation)."),
    (PROBE_REQUESTS, Kind::Counter, None, "Active probes (resilience.active_probe) of channels whose breaker is open or half-open or that cool down, by channel and outcome: ok (the breaker closed), failed (an error status or a transport failure). Never billed to a client."),
    (HEDGES, Kind::Counter, None, "Hedges (resilience.hedge) by outcome: won (the hedge committed first), lost (the first attempt committed first; the hedge was cancelled), failed (the hedge failed), budget (not sent: the hedge budget was spent)."),
    (STREAM_RESUMES, Kind::Counter, None, "Committed streams cut before their end, by what resume made of them: resumed (continued on the next target), not_text (the cut fell in a tool call, thinking or other part), no_target (no target took the prefill and answered)."),
    (MALFORMED_EVENTS, Kind::Counter, None, "Upstream stream events dropped because their data was not JSON in a format whose SDKs parse every event (Chat Completions, Responses)."),
    (OTLP_SPANS, Kind::Counter, None, "Spans sent to the OTLP receiver (telemetry.otlp), by result: exported, failed."),
    (OTLP_DROPPED, Kind::Counter, None, "Traced requests dropped because the OTLP export queue was full (the request itself is unaffected)."),
];

fn describe() {
    for &(name, kind, unit, help) in DESCRIPTIONS {
        match (kind, unit) {
            (Kind::Counter, _) => describe_counter!(name, help),
            (Kind::Gauge, Some(u)) => describe_gauge!(name, u, help),
            (Kind::Gauge, None) => describe_gauge!(name, help),
            (Kind::Histogram, Some(u)) => describe_histogram!(name, u, help),
            (Kind::Histogram, None) => describe_histogram!(name, help),
        }
    }
}

/// Results of `CONFIG_RELOADS`.
pub const RELOAD_RESULTS: &[&str] = &["ok", "unchanged", "error"];

/// Count one reload by its result (`RELOAD_RESULTS`).
pub fn config_reload(result: &'static str) {
    metrics::counter!(CONFIG_RELOADS, "result" => result).increment(1);
}

/// Export every reload result at 0 from the first scrape, so `increase()` and absence
/// alerts work before the first reload.
pub fn register_reload_results() {
    for r in RELOAD_RESULTS {
        metrics::counter!(CONFIG_RELOADS, "result" => *r).increment(0);
    }
}

/// Export the OTLP exporter's counters at 0 from the first scrape, traces on or not, so an
/// alert on export failures or drops has a series to read (R20.1).
pub fn register_otlp() {
    for r in ["exported", "failed"] {
        metrics::counter!(OTLP_SPANS, "result" => r).increment(0);
    }
    metrics::counter!(OTLP_DROPPED).increment(0);
}

/// The last config load's outcome; a success also moves the success timestamp.
pub fn config_reload_result(ok: bool, now_ms: i64) {
    metrics::gauge!(CONFIG_LAST_RELOAD_OK).set(if ok { 1.0 } else { 0.0 });
    if ok {
        metrics::gauge!(CONFIG_LAST_RELOAD_SUCCESS_TS).set(now_ms as f64 / 1000.0);
    }
}

/// The per-channel metric handles a successful request touches, registered once per
/// channel name (kept in its `ChannelState`) instead of on every call: building a labelled
/// key and looking it up in the registry costs more than the increment itself.
pub struct ChannelMetrics {
    pub attempts_success: metrics::Counter,
    pub upstream_duration: metrics::Histogram,
    pub prompt_tokens: metrics::Counter,
    pub cached_tokens: metrics::Counter,
    pub breaker_state: metrics::Gauge,
}

impl ChannelMetrics {
    pub fn new(channel: &str) -> ChannelMetrics {
        let ch = channel.to_string();
        ChannelMetrics {
            attempts_success: metrics::counter!(ATTEMPTS, "channel" => ch.clone(), "outcome" => "success"),
            upstream_duration: metrics::histogram!(UPSTREAM_DURATION, "channel" => ch.clone()),
            prompt_tokens: metrics::counter!(PROMPT_TOKENS, "channel" => ch.clone()),
            cached_tokens: metrics::counter!(CACHED_TOKENS, "channel" => ch.clone()),
            breaker_state: metrics::gauge!(BREAKER_STATE, "channel" => ch),
        }
    }
}

impl Default for ChannelMetrics {
    fn default() -> Self {
        ChannelMetrics {
            attempts_success: metrics::Counter::noop(),
            upstream_duration: metrics::Histogram::noop(),
            prompt_tokens: metrics::Counter::noop(),
            cached_tokens: metrics::Counter::noop(),
            breaker_state: metrics::Gauge::noop(),
        }
    }
}

impl std::fmt::Debug for ChannelMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelMetrics")
    }
}

/// The `outcome` labels of `STREAMS` that every committed stream ends with.
pub const STREAM_ENDS: [&str; 3] = ["complete", "incomplete", "client_cancel"];

/// Request-level metric handles, registered once per gateway (see `ChannelMetrics`).
#[derive(Debug)]
pub struct RequestMetrics {
    /// `REQUESTS` by status class: 2xx, 4xx, 5xx, other.
    requests: [metrics::Counter; 4],
    /// `STREAMS` by the outcomes every committed stream ends with ([`STREAM_ENDS`]).
    streams: [metrics::Counter; 3],
    pub duration: metrics::Histogram,
    pub attempts_per_request: metrics::Histogram,
    pub ttfb: metrics::Histogram,
    /// `OVERHEAD` (R20.3).
    pub overhead: metrics::Histogram,
    /// Each client's last hour for the status page (R20.2).
    pub clients: window::ClientHours,
    /// The OTLP trace exporter, set once at start-up when `telemetry.otlp` is configured.
    pub traces: std::sync::OnceLock<otlp::Traces>,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics::new()
    }
}

impl RequestMetrics {
    pub fn new() -> RequestMetrics {
        RequestMetrics {
            requests: ["2xx", "4xx", "5xx", "other"]
                .map(|class| metrics::counter!(REQUESTS, "status" => class)),
            streams: STREAM_ENDS.map(|outcome| metrics::counter!(STREAMS, "outcome" => outcome)),
            duration: metrics::histogram!(REQUEST_DURATION),
            attempts_per_request: metrics::histogram!(ATTEMPTS_PER_REQUEST),
            ttfb: metrics::histogram!(TTFB),
            overhead: metrics::histogram!(OVERHEAD),
            clients: window::ClientHours::default(),
            traces: std::sync::OnceLock::new(),
        }
    }

    /// Count a stream that ended with `outcome` in `STREAMS`: through a handle registered
    /// once for the outcomes of [`STREAM_ENDS`] (no label set built per stream).
    pub fn stream_ended(&self, outcome: &'static str) {
        match STREAM_ENDS.iter().position(|o| *o == outcome) {
            Some(i) => self.streams[i].increment(1),
            None => metrics::counter!(STREAMS, "outcome" => outcome).increment(1),
        }
    }

    /// The `REQUESTS` counter of a final status.
    pub fn requests(&self, status: u16) -> &metrics::Counter {
        &self.requests[match status {
            200..=299 => 0,
            400..=499 => 1,
            500..=599 => 2,
            _ => 3,
        }]
    }
}
