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
    c: &mut Collector,
) -> Resilience {
    let mut out = base.clone();
    if let Some(r) = &raw.retry {
        retry(&mut out.retry, r, prefix, c);
    }
    if let Some(b) = &raw.circuit_breaker {
        breaker(&mut out.circuit_breaker, b, prefix, c);
    }
    if let Some(cd) = &raw.cooldown {
        cooldown(&mut out.cooldown, cd, prefix, c);
    }
    if let Some(r) = &raw.stream_resume {
        out.stream_resume.enabled = r.enabled.unwrap_or(out.stream_resume.enabled);
        out.stream_resume.max = r.max.unwrap_or(out.stream_resume.max);
    }
    if let Some(p) = &raw.active_probe {
        let probe = &mut out.active_probe;
        let key_path = format!("{prefix}.active_probe.interval");
        probe.enabled = p.enabled.unwrap_or(probe.enabled);
        probe.interval = dur_nonzero(c, &key_path, &p.interval, probe.interval);
        if let Some(m) = &p.model {
            if m.trim().is_empty() {
                c.push(format!("{prefix}.active_probe.model"), "must not be empty");
            } else {
                probe.model = m.trim().to_string();
            }
        }
    }
    if let Some(h) = &raw.hedge {
        hedge(&mut out.hedge, h, prefix, c);
    }
    out
}

fn hedge(t: &mut Hedge, h: &RawHedge, prefix: &str, c: &mut Collector) {
    let k = |f: &str| format!("{prefix}.hedge.{f}");
    t.enabled = h.enabled.unwrap_or(t.enabled);
    match h.after.as_deref().map(str::trim) {
        Some("p95") => t.p95 = true,
        Some(_) => {
            t.after = dur_nonzero(c, &k("after"), &h.after, t.after);
            t.p95 = false;
        }
        None => {}
    }
    if let Some(n) = h.max_extra {
        if n == 0 {
            c.push(
                k("max_extra"),
                "must be at least 1 (enabled: false turns hedging off)",
            );
        } else {
            t.max_extra = n;
        }
    }
    t.budget_ratio = float_in(
        c,
        &k("budget_ratio"),
        h.budget_ratio,
        0.0,
        1.0,
        t.budget_ratio,
    );
}

fn retry(t: &mut Retry, r: &RawRetry, prefix: &str, c: &mut Collector) {
    let k = |f: &str| format!("{prefix}.retry.{f}");
    t.max_retries = r.max_retries.unwrap_or(t.max_retries);
    t.retry_on = status_set(c, &k("retry_on"), &r.retry_on, &t.retry_on);
    t.initial_backoff = dur(
        c,
        &k("initial_backoff"),
        &r.initial_backoff,
        t.initial_backoff,
    );
    t.max_backoff = dur(c, &k("max_backoff"), &r.max_backoff, t.max_backoff);
    t.backoff_factor = float_in(
        c,
        &k("backoff_factor"),
        r.backoff_factor,
        1.0,
        f64::INFINITY,
        t.backoff_factor,
    );
    t.jitter_factor = float_in(
        c,
        &k("jitter_factor"),
        r.jitter_factor,
        0.0,
        1.0,
        t.jitter_factor,
    );
    if t.max_backoff < t.initial_backoff {
        c.push(
            k("max_backoff"),
            format!(
                "{} is less than initial_backoff {}",
                humantime::format_duration(t.max_backoff),
                humantime::format_duration(t.initial_backoff)
            ),
        );
    }
}

fn breaker(t: &mut Breaker, b: &RawBreaker, prefix: &str, c: &mut Collector) {
    let k = |f: &str| format!("{prefix}.circuit_breaker.{f}");
    t.enabled = b.enabled.unwrap_or(t.enabled);
    t.scope = choice(
        c,
        &k("scope"),
        &b.scope,
        &[
            ("provider", BreakerScope::Provider),
            ("model", BreakerScope::Model),
        ],
        t.scope,
    );
    t.failure_on = status_set(c, &k("failure_on"), &b.failure_on, &t.failure_on);
    t.failure_threshold = b.failure_threshold.unwrap_or(t.failure_threshold);
    if let Some(s) = b.success_threshold {
        if s == 0 {
            c.push(k("success_threshold"), "must be at least 1");
        } else {
            t.success_threshold = s;
        }
    }
    t.timeout = dur_nonzero(c, &k("timeout"), &b.timeout, t.timeout);
    t.slow_call_threshold = dur(
        c,
        &k("slow_call_threshold"),
        &b.slow_call_threshold,
        t.slow_call_threshold,
    );
}

fn cooldown(t: &mut Cooldown, cd: &RawCooldown, prefix: &str, c: &mut Collector) {
    let k = |f: &str| format!("{prefix}.cooldown.{f}");
    t.consecutive_retryable_failures = cd
        .consecutive_retryable_failures
        .unwrap_or(t.consecutive_retryable_failures);
    t.duration = dur(c, &k("duration"), &cd.duration, t.duration);
}
