//! The raw tree as written: every field optional (defaults are applied in validation),
//! unknown keys rejected. Durations and status sets stay strings until validation.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

pub(crate) type Dur = Option<String>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub cert: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdmin {
    pub listen: Option<String>,
    pub token: Option<String>,
    pub status_token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStorage {
    pub path: Option<String>,
    pub url: Option<String>,
    pub lease_ttl: Dur,
    pub queue_capacity: Option<u64>,
    pub pool_size: Option<u64>,
    pub pool_timeout: Dur,
    pub debit_batch: Option<u64>,
    pub request_log: Option<RawRequestLog>,
}

/// `shared:` — live state shared by several replicas (R17).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawShared {
    pub redis: Option<String>,
    pub replicas: Option<u64>,
    pub fail_open: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRequestLog {
    pub max_age: Dur,
    pub max_rows: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub max_body_bytes: Option<u64>,
    pub header_read_timeout: Dur,
    pub max_connections: Option<u64>,
    pub idle_timeout: Dur,
    pub max_connections_per_ip: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTimeouts {
    pub upstream_header: Dur,
    pub image_upstream_header: Dur,
    pub first_byte: Dur,
    pub keepalive: Dur,
    pub non_stream: Dur,
    pub request_deadline: Dur,
    pub drain: Dur,
    pub stream_stall: Dur,
    pub min_tokens_per_second: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetryBudget {
    pub ratio: Option<f64>,
    pub min_per_second: Option<u32>,
    pub ttl: Dur,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouting {
    pub retry_times: Option<u32>,
    pub tier_walk: Option<String>,
    pub failover_on: Option<String>,
    pub never_failover_on: Option<String>,
    pub retry_budget: Option<RawRetryBudget>,
    pub balance: Option<String>,
    pub max_upstream_cooldown: Dur,
    pub failover_on_codes: Option<Vec<String>>,
    pub wait_retry_after: Dur,
}

/// `clients.NAME.limits` / `groups.NAME.limits` (R15.1). Signed so a negative value is
/// reported as such rather than as a type error.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClientLimits {
    pub rpm: Option<i64>,
    pub rpd: Option<i64>,
    pub tpm: Option<i64>,
    pub concurrency: Option<i64>,
}

/// `channels.NAME.limits` (R15.3): one key's published limits.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKeyLimits {
    pub rpm: Option<i64>,
    pub tpm: Option<i64>,
    pub concurrency: Option<i64>,
}

/// `groups.NAME`: defaults for the clients of a group.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGroup {
    pub limits: Option<RawClientLimits>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetry {
    pub max_retries: Option<u32>,
    pub retry_on: Option<String>,
    pub initial_backoff: Dur,
    pub max_backoff: Dur,
    pub backoff_factor: Option<f64>,
    pub jitter_factor: Option<f64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBreaker {
    pub enabled: Option<bool>,
    pub scope: Option<String>,
    pub failure_on: Option<String>,
    pub failure_threshold: Option<u32>,
    pub success_threshold: Option<u32>,
    pub timeout: Dur,
    pub slow_call_threshold: Dur,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCooldown {
    pub consecutive_retryable_failures: Option<u32>,
    pub duration: Dur,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResilience {
    pub retry: Option<RawRetry>,
    pub circuit_breaker: Option<RawBreaker>,
    pub cooldown: Option<RawCooldown>,
    pub stream_resume: Option<RawStreamResume>,
    pub active_probe: Option<RawActiveProbe>,
    pub hedge: Option<RawHedge>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHedge {
    pub enabled: Option<bool>,
    pub after: Dur,
    pub max_extra: Option<u32>,
    pub budget_ratio: Option<f64>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawActiveProbe {
    pub enabled: Option<bool>,
    pub interval: Dur,
    pub model: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStreamResume {
    pub enabled: Option<bool>,
    pub max: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAutoDisable {
    pub enabled: Option<bool>,
    pub auto_enable: Option<bool>,
    pub statuses: Option<String>,
    pub error_codes: Option<Vec<String>>,
    pub error_types: Option<Vec<String>>,
    pub keywords: Option<Vec<String>>,
    pub probe_interval: Dur,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawImagesFailover {
    pub enabled: Option<bool>,
    pub include_ambiguous: Option<bool>,
    pub include_uncertain: Option<bool>,
    pub key_retry_budget: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawChannel {
    pub kind: Option<String>,
    pub base_url: Option<String>,
    pub keys: Option<Vec<String>>,
    pub models: Option<Vec<String>>,
    pub model_mapping: Option<BTreeMap<String, String>>,
    pub paths: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
    pub priority: Option<i64>,
    pub weight: Option<i64>,
    pub enabled: Option<bool>,
    pub auto_ban: Option<bool>,
    pub status_code_mapping: Option<BTreeMap<String, String>>,
    pub stream_policy: Option<String>,
    pub non_stream_timeout: Dur,
    pub headers: Option<BTreeMap<String, String>>,
    pub forward_organization: Option<bool>,
    pub traceparent: Option<bool>,
    pub resilience: Option<RawResilience>,
    pub protocol: Option<String>,
    pub include_usage: Option<bool>,
    pub limits: Option<RawKeyLimits>,
    pub api_version: Option<String>,
    pub translate: Option<bool>,
    pub max_tokens_field: Option<String>,
    pub reasoning_history: Option<String>,
    pub stream_stall: Dur,
    pub responses: Option<String>,
    pub prefill: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVirtualModel {
    pub targets: Option<Vec<String>>,
    pub groups: Option<Vec<String>>,
    pub stream_resume: Option<RawStreamResume>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub name: Option<String>,
    pub model: Option<String>,
    pub path: Option<String>,
    pub key: Option<String>,
    pub ttl: Dur,
    pub skip_retry_on_failure: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSticky {
    pub conversation_ttl: Dur,
    pub session_ttl: Dur,
    pub user_model_ttl: Dur,
    pub bucket_ttl: Dur,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAffinity {
    pub rules: Option<Vec<RawRule>>,
    pub sticky: Option<RawSticky>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClient {
    pub key: Option<String>,
    pub key_sha256: Option<String>,
    pub group: Option<String>,
    pub cross_group_retry: Option<bool>,
    pub quota: Option<u64>,
    pub trusted: Option<bool>,
    pub limits: Option<RawClientLimits>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPrice {
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
    pub max_output: Option<u64>,
}

/// `telemetry:` (R20.1).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelemetry {
    pub otlp: Option<RawOtlp>,
}

/// `telemetry.otlp:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOtlp {
    pub endpoint: Option<String>,
    pub protocol: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub sample_ratio: Option<f64>,
    pub service_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTasks {
    pub paths: Option<Vec<String>>,
}

/// The whole file, each section deserialized on its own so one bad section does not hide
/// the errors of the others. A section that failed to deserialize is left at its default.
#[derive(Debug, Default)]
pub(crate) struct RawConfig {
    pub listen: Option<String>,
    pub tls: Option<RawTls>,
    pub admin: RawAdmin,
    pub storage: RawStorage,
    pub shared: RawShared,
    pub debug_headers: Option<bool>,
    pub limits: RawLimits,
    pub timeouts: RawTimeouts,
    pub routing: RawRouting,
    pub auto_groups: Option<Vec<String>>,
    pub resilience: RawResilience,
    pub auto_disable: RawAutoDisable,
    pub images_failover: RawImagesFailover,
    /// (name, channel); `None` when the entry failed to deserialize (it still counts as
    /// existing, so targets naming it do not raise a second error).
    pub channels: Vec<(String, Option<RawChannel>)>,
    pub virtual_models: Vec<(String, Option<RawVirtualModel>)>,
    pub affinity: RawAffinity,
    pub clients: Vec<(String, Option<RawClient>)>,
    pub groups: Vec<(String, Option<RawGroup>)>,
    pub pricing: Vec<(String, Option<RawPrice>)>,
    pub telemetry: RawTelemetry,
    pub tasks: RawTasks,
    /// Groups declared by channels and virtual models as written (broken entries included);
    /// `None` when they cannot be told, and groups are then not cross-checked.
    pub declared_groups: Option<BTreeSet<String>>,
}
