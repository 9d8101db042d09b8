//! The label values known in advance (R12.2): the request path counts with them, and the
//! application layer exports every series they and the config's names make at 0
//! (`app::series::register_config`).

/// `outcome` values of `ATTEMPTS` (the attempt's error class).
pub const ATTEMPT_OUTCOMES: &[&str] = &[
    "success",
    "http_429",
    "http_4xx",
    "http_5xx",
    "header_timeout",
    "first_byte_timeout",
    "body_timeout",
    "empty_body",
    "broken",
    "reset",
    "connect",
    "channel_error",
    "skip_retry",
    "client_gone",
    "local_error",
    "deadline",
    "circuit_open",
];

/// `result` values of `PROBES`.
pub const PROBE_RESULTS: &[&str] = &["ok", "failed", "reenabled", "key_reenabled"];

/// `outcome` values of `STREAMS`.
pub const STREAM_OUTCOMES: &[&str] = &[
    "complete",
    "incomplete",
    "client_cancel",
    "first_byte_timeout",
    "below_min_tokens_per_second",
];

/// `to` values of `BREAKER_TRANSITIONS`.
pub const BREAKER_STATES: &[&str] = &["closed", "half_open", "open"];

/// `result` values of `STICKY`.
pub const STICKY_RESULTS: &[&str] = &["hit", "miss", "stale", "fallback"];

/// `source` values of `KEY_COOLDOWNS` (`limits::upstream::Source::as_str`).
pub const KEY_COOLDOWN_SOURCES: &[&str] = &[
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-reset",
    "anthropic-ratelimit-reset",
];

/// `op` values of `STORE_DROPPED`.
pub const STORE_OPS: &[&str] = &[
    "request_log",
    "ledger",
    "channel_state",
    "task_binding",
    "affinity_binding",
];
