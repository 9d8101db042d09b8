//! Resilience merge (R2.2): built-in defaults ← global block ← channel block, field by field.

use std::time::Duration;

use crate::config::error::Collector;
use crate::config::load::raw::{RawBreaker, RawCooldown, RawHedge, RawResilience, RawRetry};
use crate::config::load::scalars::{builtin_set, choice, dur, dur_nonzero, float_in, status_set};
use crate::config::model::{
    ActiveProbe, Breaker, BreakerScope, Cooldown, Hedge, Resilience, Retry, StreamResume,
};

/// The built-in resilience defaults (R2.2, R4.5, R6.1: GoModel's defaults).
pub fn default_resilience() -> Resilience {
    Resilience {
        retry: Retry {
            max_retries: 3,
            retry_on: builtin_set("429,502,503,504,522,524"),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            backoff_factor: 2.0,
            jitter_factor: 0.1,
        },
        circuit_breaker: Breaker {
            enabled: true,
            scope: BreakerScope::Provider,
            failure_on: builtin_set("429,5xx"),
            failure_threshold: 5,
            success_threshold: 2,
            timeout: Duration::from_secs(30),
            slow_call_threshold: Duration::ZERO,
        },
        cooldown: Cooldown {
            consecutive_retryable_failures: 0,
            duration: Duration::from_secs(600),
        },
        stream_resume: StreamResume {
            enabled: false,
            max: 1,
        },
        active_probe: ActiveProbe {
            enabled: false,
            interval: Duration::from_secs(10),
            model: String::new(),
        },
        hedge: Hedge {
            enabled: false,
            after: Duration::from_secs(2),
            p95: false,
            max_extra: 1,
            budget_ratio: 0.1,
        },
    }
}

/// `base` with every field that `raw` lists replaced; `prefix` is the key path of the
/// block (`resilience` or `channels.NAME.resilience`) used in error messages.
pub(crate) fn overlay(
    base: &Resilience,
    raw: &RawResilience,
    prefix: &str,
    collector: &mut Collector,
) -> Resilience {
    let mut out = base.clone();
    if let Some(raw_retry) = &raw.retry {
        retry(&mut out.retry, raw_retry, prefix, collector);
    }
    if let Some(raw_breaker) = &raw.circuit_breaker {
        breaker(&mut out.circuit_breaker, raw_breaker, prefix, collector);
    }
    if let Some(raw_cooldown) = &raw.cooldown {
        cooldown(&mut out.cooldown, raw_cooldown, prefix, collector);
    }
    if let Some(raw_resume) = &raw.stream_resume {
        out.stream_resume.enabled = raw_resume.enabled.unwrap_or(out.stream_resume.enabled);
        out.stream_resume.max = raw_resume.max.unwrap_or(out.stream_resume.max);
    }
    if let Some(raw_probe) = &raw.active_probe {
        let probe = &mut out.active_probe;
        let key_path = format!("{prefix}.active_probe.interval");
        probe.enabled = raw_probe.enabled.unwrap_or(probe.enabled);
        probe.interval = dur_nonzero(collector, &key_path, &raw_probe.interval, probe.interval);
        if let Some(model) = &raw_probe.model {
            if model.trim().is_empty() {
                collector.push(format!("{prefix}.active_probe.model"), "must not be empty");
            } else {
                probe.model = model.trim().to_string();
            }
        }
    }
    if let Some(raw_hedge) = &raw.hedge {
        hedge(&mut out.hedge, raw_hedge, prefix, collector);
    }
    out
}

fn hedge(merged: &mut Hedge, raw: &RawHedge, prefix: &str, collector: &mut Collector) {
    let key = |field: &str| format!("{prefix}.hedge.{field}");
    merged.enabled = raw.enabled.unwrap_or(merged.enabled);
    match raw.after.as_deref().map(str::trim) {
        Some("p95") => merged.p95 = true,
        Some(_) => {
            merged.after = dur_nonzero(collector, &key("after"), &raw.after, merged.after);
            merged.p95 = false;
        }
        None => {}
    }
    if let Some(extra) = raw.max_extra {
        if extra == 0 {
            collector.push(
                key("max_extra"),
                "must be at least 1 (enabled: false turns hedging off)",
            );
        } else {
            merged.max_extra = extra;
        }
    }
    merged.budget_ratio = float_in(
        collector,
        &key("budget_ratio"),
        raw.budget_ratio,
        0.0,
        1.0,
        merged.budget_ratio,
    );
}

fn retry(merged: &mut Retry, raw: &RawRetry, prefix: &str, collector: &mut Collector) {
    let key = |field: &str| format!("{prefix}.retry.{field}");
    merged.max_retries = raw.max_retries.unwrap_or(merged.max_retries);
    merged.retry_on = status_set(collector, &key("retry_on"), &raw.retry_on, &merged.retry_on);
    merged.initial_backoff = dur(
        collector,
        &key("initial_backoff"),
        &raw.initial_backoff,
        merged.initial_backoff,
    );
    merged.max_backoff = dur(
        collector,
        &key("max_backoff"),
        &raw.max_backoff,
        merged.max_backoff,
    );
    merged.backoff_factor = float_in(
        collector,
        &key("backoff_factor"),
        raw.backoff_factor,
        1.0,
        f64::INFINITY,
        merged.backoff_factor,
    );
    merged.jitter_factor = float_in(
        collector,
        &key("jitter_factor"),
        raw.jitter_factor,
        0.0,
        1.0,
        merged.jitter_factor,
    );
    if merged.max_backoff < merged.initial_backoff {
        collector.push(
            key("max_backoff"),
            format!(
                "{} is less than initial_backoff {}",
                humantime::format_duration(merged.max_backoff),
                humantime::format_duration(merged.initial_backoff)
            ),
        );
    }
}

fn breaker(merged: &mut Breaker, raw: &RawBreaker, prefix: &str, collector: &mut Collector) {
    let key = |field: &str| format!("{prefix}.circuit_breaker.{field}");
    merged.enabled = raw.enabled.unwrap_or(merged.enabled);
    merged.scope = choice(
        collector,
        &key("scope"),
        &raw.scope,
        &[
            ("provider", BreakerScope::Provider),
            ("model", BreakerScope::Model),
        ],
        merged.scope,
    );
    merged.failure_on = status_set(
        collector,
        &key("failure_on"),
        &raw.failure_on,
        &merged.failure_on,
    );
    merged.failure_threshold = raw.failure_threshold.unwrap_or(merged.failure_threshold);
    if let Some(threshold) = raw.success_threshold {
        if threshold == 0 {
            collector.push(key("success_threshold"), "must be at least 1");
        } else {
            merged.success_threshold = threshold;
        }
    }
    merged.timeout = dur_nonzero(collector, &key("timeout"), &raw.timeout, merged.timeout);
    merged.slow_call_threshold = dur(
        collector,
        &key("slow_call_threshold"),
        &raw.slow_call_threshold,
        merged.slow_call_threshold,
    );
}

fn cooldown(merged: &mut Cooldown, raw: &RawCooldown, prefix: &str, collector: &mut Collector) {
    let key = |field: &str| format!("{prefix}.cooldown.{field}");
    merged.consecutive_retryable_failures = raw
        .consecutive_retryable_failures
        .unwrap_or(merged.consecutive_retryable_failures);
    merged.duration = dur(collector, &key("duration"), &raw.duration, merged.duration);
}
