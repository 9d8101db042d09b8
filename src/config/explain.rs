//! `switchyard check --explain`: the effective settings of every channel (R2.2, R2.6).
//! Key values are never printed, only their count.

use std::fmt::Write;
use std::time::Duration;

use crate::config::model::*;

fn d(x: Duration) -> String {
    if x.is_zero() {
        "0s".into()
    } else {
        humantime::format_duration(x).to_string()
    }
}

fn resilience(out: &mut String, r: &Resilience) {
    let t = &r.retry;
    let _ = writeln!(
        out,
        "    retry: max_retries={} retry_on={} initial_backoff={} max_backoff={} backoff_factor={} jitter_factor={}",
        t.max_retries, t.retry_on, d(t.initial_backoff), d(t.max_backoff), t.backoff_factor, t.jitter_factor
    );
    let b = &r.circuit_breaker;
    let scope = b.scope.as_str();
    let _ = writeln!(
        out,
        "    circuit_breaker: enabled={} scope={} failure_on={} failure_threshold={} success_threshold={} timeout={} slow_call_threshold={}",
        b.enabled, scope, b.failure_on, b.failure_threshold, b.success_threshold, d(b.timeout), d(b.slow_call_threshold)
    );
    let c = &r.cooldown;
    let _ = writeln!(
        out,
        "    cooldown: consecutive_retryable_failures={} duration={}",
        c.consecutive_retryable_failures,
        d(c.duration)
    );
    let p = &r.active_probe;
    let model = if p.model.is_empty() {
        "(first model)"
    } else {
        &p.model
    };
    let _ = writeln!(
        out,
        "    active_probe: enabled={} interval={} model={}",
        p.enabled,
        d(p.interval),
        model
    );
    let h = &r.hedge;
    let _ = writeln!(
        out,
        "    hedge: enabled={} after={} max_extra={} budget_ratio={}",
        h.enabled,
        if h.p95 {
            format!("p95 (until known: {})", d(h.after))
        } else {
            d(h.after)
        },
        h.max_extra,
        h.budget_ratio
    );
}

/// Human-readable effective settings, one block per channel.
pub fn explain(cfg: &Config) -> String {
    let mut out = String::new();
    let t = &cfg.timeouts;
    let _ = writeln!(out, "config: {}", cfg.source.display());
    let _ = writeln!(
        out,
        "timeouts: upstream_header={} image_upstream_header={} first_byte={} keepalive={} non_stream={} request_deadline={} drain={} min_tokens_per_second={}",
        d(t.upstream_header), d(t.image_upstream_header), d(t.first_byte), d(t.keepalive), d(t.non_stream), d(t.request_deadline), d(t.drain), t.min_tokens_per_second
    );
    let r = &cfg.routing;
    let walk = r.tier_walk.as_str();
    let _ = writeln!(
        out,
        "routing: retry_times={} tier_walk={} balance={} failover_on={} never_failover_on={} retry_budget={{ratio={}, min_per_second={}, ttl={}}}",
        r.retry_times, walk, r.balance.as_str(), r.failover_on, r.never_failover_on, r.retry_budget.ratio, r.retry_budget.min_per_second, d(r.retry_budget.ttl)
    );
    storage(&mut out, &cfg.storage);
    for ch in &cfg.channels {
        channel(&mut out, ch, t);
    }
    for vm in &cfg.virtual_models {
        let targets: Vec<String> = vm
            .targets
            .iter()
            .map(|t| format!("{}/{}", t.channel, t.model))
            .collect();
        let _ = writeln!(
            out,
            "virtual model {}: targets=[{}] groups=[{}]",
            vm.name,
            targets.join(", "),
            vm.groups.join(", ")
        );
    }
    out
}

/// The storage line: SQLite, or PostgreSQL with its pool and debit batch (the URL is never
/// printed: it may hold a password).
fn storage(out: &mut String, s: &Storage) {
    if s.url.is_none() {
        let _ = writeln!(
            out,
            "storage: sqlite path={} queue_capacity={}",
            s.path, s.queue_capacity
        );
        return;
    }
    let _ = writeln!(
        out,
        "storage: postgres pool_size={} pool_timeout={} debit_batch={} lease_ttl={} queue_capacity={}",
        s.pool_size,
        d(s.pool_timeout),
        s.debit_batch,
        d(s.lease_ttl),
        s.queue_capacity
    );
}

/// One channel's block: kind and endpoint, routing, models and paths, resilience.
fn channel(out: &mut String, ch: &Channel, t: &Timeouts) {
    let kind = ch.kind.as_str();
    let policy = match ch.stream_policy {
        StreamPolicy::Passthrough => "\"\"",
        other => other.as_str(),
    };
    let ns = if ch.non_stream_timeout.is_zero() {
        t.non_stream
    } else {
        ch.non_stream_timeout
    };
    let _ = writeln!(out, "channel {}:", ch.name);
    let _ = writeln!(
        out,
        "    kind={}{} base_url={}://{}{} keys={} enabled={} auto_ban={} translate={} responses={}",
        kind,
        api_version(ch),
        ch.base_url.scheme,
        ch.base_url.authority,
        ch.base_url.path_prefix,
        ch.keys.len(),
        ch.enabled,
        ch.auto_ban,
        ch.translate,
        ch.responses.as_str()
    );
    let _ = writeln!(
        out,
        "    priority={} weight={} groups=[{}] stream_policy={} non_stream_timeout={}",
        ch.priority,
        ch.weight,
        ch.groups.join(", "),
        policy,
        d(ns)
    );
    let mapped: Vec<String> = ch
        .models
        .iter()
        .map(|m| match ch.model_mapping.get(m) {
            Some(up) => format!("{m}->{up}"),
            None => m.clone(),
        })
        .collect();
    let _ = writeln!(
        out,
        "    models=[{}] paths=[{}]",
        mapped.join(", "),
        ch.paths.join(", ")
    );
    resilience(out, &ch.resilience);
}

/// ` api_version=...` for an azure channel, "" otherwise.
fn api_version(ch: &crate::config::model::Channel) -> String {
    if ch.api_version.is_empty() {
        String::new()
    } else {
        format!(" api_version={}", ch.api_version)
    }
}
