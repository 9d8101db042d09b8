//! [`register_config`]: every series the config's names (channels, clients) and the known
//! label values make, exported at 0 from the first scrape (R12.2). It lives in the
//! application layer because it reads the names of every layer below it.

use crate::config::model::Config;
use crate::telemetry::{self, *};

/// Export at 0 every series whose label values the config names (channels, clients) or
/// that are fixed (outcomes, results), so `increase()` and absence alerts work from the
/// first scrape (the Prometheus instrumentation guide). Called at start-up and after each
/// reload; series that exist keep their values.
pub fn register_config(cfg: &Config) {
    for ch in &cfg.channels {
        register_channel(ch);
    }
    for kind in crate::affinity::StickyKind::ALL {
        for r in STICKY_RESULTS {
            metrics::counter!(STICKY, "kind" => kind.as_str(), "result" => *r).increment(0);
        }
    }
    for op in STORE_OPS {
        metrics::counter!(STORE_DROPPED, "op" => *op).increment(0);
    }
    for table in ["request_log", "ledger"] {
        metrics::counter!(STORE_PRUNED, "table" => table).increment(0);
    }
    let _ = metrics::gauge!(STORE_DISK_FULL);
    let _ = metrics::gauge!(telemetry::STORE_UP);
    metrics::counter!(telemetry::QUOTA_LEASE_REFUNDS).increment(0);
    metrics::counter!(telemetry::QUOTA_LEASE_LOST).increment(0);
    for mode in ["fail_closed", "fail_open"] {
        metrics::counter!(telemetry::QUOTA_UNAVAILABLE, "mode" => mode).increment(0);
    }
    for cl in &cfg.clients {
        quota().register(&cl.name);
        for kind in crate::limits::Kind::ALL {
            metrics::counter!(RATE_LIMITED, "client" => cl.name.clone(), "kind" => kind.as_str())
                .increment(0);
        }
        let _ = metrics::gauge!(CLIENT_CONCURRENCY, "client" => cl.name.clone());
    }
    for o in STREAM_OUTCOMES {
        metrics::counter!(STREAMS, "outcome" => *o).increment(0);
    }
    for class in ["2xx", "4xx", "5xx", "other"] {
        metrics::counter!(REQUESTS, "status" => class).increment(0);
    }
    metrics::counter!(RETRY_BUDGET_EXHAUSTED).increment(0);
    // Shared live state (R17): 0 until (and unless) a shared.redis answers.
    let _ = metrics::gauge!(SHARED_STATE_UP);
    for r in ["published", "applied", "dropped"] {
        metrics::counter!(SHARED_CHANGES, "result" => r).increment(0);
    }
    metrics::counter!(SHARED_LIMIT_FALLBACKS).increment(0);
    metrics::counter!(KEEPALIVES).increment(0);
    metrics::counter!(telemetry::MALFORMED_EVENTS).increment(0);
    metrics::counter!(telemetry::SHARED_LIMIT_RELEASES_DROPPED).increment(0);
    for o in ["won", "lost", "failed", "budget"] {
        metrics::counter!(telemetry::HEDGES, "outcome" => o).increment(0);
    }
    for o in ["resumed", "not_text", "no_target"] {
        metrics::counter!(telemetry::STREAM_RESUMES, "outcome" => o).increment(0);
    }
    for field in crate::wire::translate::DROPPABLE_FIELDS {
        metrics::counter!(telemetry::TRANSLATION_DROPPED, "field" => *field).increment(0);
    }

    metrics::counter!(CONNECTIONS_REJECTED).increment(0);
    metrics::counter!(STORE_WRITTEN).increment(0);
}

/// Every series named by one channel, at 0.
fn register_channel(ch: &crate::config::model::Channel) {
    let name = || ch.name.clone();
    for o in ATTEMPT_OUTCOMES {
        metrics::counter!(ATTEMPTS, "channel" => name(), "outcome" => *o).increment(0);
    }
    for r in PROBE_RESULTS {
        metrics::counter!(PROBES, "channel" => name(), "result" => *r).increment(0);
    }
    for o in ["ok", "failed"] {
        metrics::counter!(telemetry::PROBE_REQUESTS, "channel" => name(), "outcome" => o)
            .increment(0);
    }
    metrics::counter!(RETRIES, "channel" => name()).increment(0);
    metrics::counter!(PROMPT_TOKENS, "channel" => name()).increment(0);
    metrics::counter!(CACHED_TOKENS, "channel" => name()).increment(0);
    let _ = metrics::gauge!(BREAKER_STATE, "channel" => name());
    let _ = metrics::gauge!(CHANNEL_DISABLED, "channel" => name());
    let _ = metrics::histogram!(UPSTREAM_DURATION, "channel" => name());
    for to in BREAKER_STATES {
        metrics::counter!(BREAKER_TRANSITIONS, "channel" => name(), "to" => *to).increment(0);
    }
    for s in KEY_COOLDOWN_SOURCES {
        metrics::counter!(KEY_COOLDOWNS, "channel" => name(), "source" => *s).increment(0);
    }
    for r in ["limit", "cooldown"] {
        metrics::counter!(KEYS_HELD_BACK, "channel" => name(), "reason" => r).increment(0);
    }
}

#[cfg(test)]
mod tests {
    use crate::routing::policy::{Outcome, TransportKind};
    use crate::telemetry::{ATTEMPT_OUTCOMES, KEY_COOLDOWN_SOURCES};

    /// Every source a key cool-down can be learned from is exported at 0.
    #[test]
    fn every_key_cooldown_source_is_listed() {
        use crate::limits::upstream::Source;
        for s in [
            Source::RetryAfterMs,
            Source::RetryAfter,
            Source::OpenAiReset,
            Source::AnthropicReset,
        ] {
            assert!(KEY_COOLDOWN_SOURCES.contains(&s.as_str()), "{s:?}");
        }
    }

    /// Every attempt class the request path can produce is exported at 0 at start-up.
    #[test]
    fn every_attempt_class_is_listed() {
        let status = |code| Outcome::Status {
            code,
            error_code: None,
            error_type: None,
            message: String::new(),
        };
        let mut all = vec![
            Outcome::Success,
            status(429),
            status(404),
            status(503),
            Outcome::ChannelError(crate::routing::outcome::ChannelFault::InvalidRequest),
            Outcome::SkipRetry(String::new()),
            Outcome::ClientGone,
            Outcome::LocalAdapter(String::new()),
            Outcome::DeadlineExceeded,
        ];
        for k in TransportKind::ALL {
            all.push(Outcome::Transport(k));
        }
        for o in &all {
            let class = crate::routing::outcome::error_class(o);
            assert!(ATTEMPT_OUTCOMES.contains(&class), "{class} not listed");
        }
    }

    /// B-log-truth: `connect` means the upstream was never reached; a connection that
    /// was made and then reset (the request may have been sent) is `reset`.
    #[test]
    fn a_reset_is_not_labelled_connect() {
        use crate::routing::outcome::{error_class, Outcome};
        use crate::routing::policy::TransportKind as T;
        assert_eq!(error_class(&Outcome::Transport(T::Reset)), "reset");
        for k in [T::Connect, T::Dns, T::Tls] {
            assert_eq!(error_class(&Outcome::Transport(k)), "connect", "{k:?}");
        }
    }
}
