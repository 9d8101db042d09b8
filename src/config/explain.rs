//! `switchyard check --explain`: the effective settings of every channel (R2.2, R2.6).
//! Key values are never printed, only their count.

use std::fmt::Write;
use std::time::Duration;

use crate::config::model::*;

fn d(duration: Duration) -> String {
    if duration.is_zero() {
        "0s".into()
    } else {
        humantime::format_duration(duration).to_string()
    }
}

fn resilience(out: &mut String, resilience: &Resilience) {
    let retry = &resilience.retry;
    let _ = writeln!(
        out,
        "    retry: max_retries={} retry_on={} initial_backoff={} max_backoff={} backoff_factor={} jitter_factor={}",
        retry.max_retries, retry.retry_on, d(retry.initial_backoff), d(retry.max_backoff), retry.backoff_factor, retry.jitter_factor
    );
    let breaker = &resilience.circuit_breaker;
    let scope = breaker.scope.as_str();
    let _ = writeln!(
        out,
        "    circuit_breaker: enabled={} scope={} failure_on={} failure_threshold={} success_threshold={} timeout={} slow_call_threshold={}",
        breaker.enabled, scope, breaker.failure_on, breaker.failure_threshold, breaker.success_threshold, d(breaker.timeout), d(breaker.slow_call_threshold)
    );
    let cooldown = &resilience.cooldown;
    let _ = writeln!(
        out,
        "    cooldown: consecutive_retryable_failures={} duration={}",
        cooldown.consecutive_retryable_failures,
        d(cooldown.duration)
    );
    let probe = &resilience.active_probe;
    let model = if probe.model.is_empty() {
        "(first model)"
    } else {
        &probe.model
    };
    let _ = writeln!(
        out,
        "    active_probe: enabled={} interval={} model={}",
        probe.enabled,
        d(probe.interval),
        model
    );
    let hedge = &resilience.hedge;
    let _ = writeln!(
        out,
        "    hedge: enabled={} after={} max_extra={} budget_ratio={}",
        hedge.enabled,
        if hedge.p95 {
            format!("p95 (until known: {})", d(hedge.after))
        } else {
            d(hedge.after)
        },
        hedge.max_extra,
        hedge.budget_ratio
    );
}

/// Human-readable effective settings, one block per channel.
pub fn explain(cfg: &Config) -> String {
    let mut out = String::new();
    let timeouts = &cfg.timeouts;
    let _ = writeln!(out, "config: {}", cfg.source.display());
    let _ = writeln!(
        out,
        "timeouts: upstream_header={} image_upstream_header={} first_byte={} keepalive={} non_stream={} request_deadline={} drain={} min_tokens_per_second={}",
        d(timeouts.upstream_header), d(timeouts.image_upstream_header), d(timeouts.first_byte), d(timeouts.keepalive), d(timeouts.non_stream), d(timeouts.request_deadline), d(timeouts.drain), timeouts.min_tokens_per_second
    );
    let routing = &cfg.routing;
    let walk = routing.tier_walk.as_str();
    let _ = writeln!(
        out,
        "routing: retry_times={} tier_walk={} balance={} failover_on={} never_failover_on={} retry_budget={{ratio={}, min_per_second={}, ttl={}}}",
        routing.retry_times, walk, routing.balance.as_str(), routing.failover_on, routing.never_failover_on, routing.retry_budget.ratio, routing.retry_budget.min_per_second, d(routing.retry_budget.ttl)
    );
    storage(&mut out, &cfg.storage);
    for ch in &cfg.channels {
        channel(&mut out, ch, timeouts);
    }
    for virtual_model in &cfg.virtual_models {
        let targets: Vec<String> = virtual_model
            .targets
            .iter()
            .map(|target| format!("{}/{}", target.channel, target.model))
            .collect();
        let _ = writeln!(
            out,
            "virtual model {}: targets=[{}] groups=[{}]",
            virtual_model.name,
            targets.join(", "),
            virtual_model.groups.join(", ")
        );
    }
    out
}

/// The storage line: SQLite, or PostgreSQL with its pool and debit batch (the URL is never
/// printed: it may hold a password).
fn storage(out: &mut String, storage: &Storage) {
    if storage.url.is_none() {
        let _ = writeln!(
            out,
            "storage: sqlite path={} queue_capacity={}",
            storage.path, storage.queue_capacity
        );
        return;
    }
    let _ = writeln!(
        out,
        "storage: postgres pool_size={} pool_timeout={} debit_batch={} lease_ttl={} queue_capacity={}",
        storage.pool_size,
        d(storage.pool_timeout),
        storage.debit_batch,
        d(storage.lease_ttl),
        storage.queue_capacity
    );
}

/// One channel's block: kind and endpoint, routing, models and paths, resilience.
fn channel(out: &mut String, channel: &Channel, timeouts: &Timeouts) {
    let kind = channel.kind.as_str();
    let policy = match channel.stream_policy {
        StreamPolicy::Passthrough => "\"\"",
        other => other.as_str(),
    };
    let non_stream = if channel.non_stream_timeout.is_zero() {
        timeouts.non_stream
    } else {
        channel.non_stream_timeout
    };
    let _ = writeln!(out, "channel {}:", channel.name);
    let _ = writeln!(
        out,
        "    kind={}{} base_url={}://{}{} keys={} enabled={} auto_ban={} translate={} responses={}",
        kind,
        api_version(channel),
        channel.base_url.scheme,
        channel.base_url.authority,
        channel.base_url.path_prefix,
        channel.keys.len(),
        channel.enabled,
        channel.auto_ban,
        channel.translate,
        channel.responses.as_str()
    );
    let _ = writeln!(
        out,
        "    priority={} weight={} groups=[{}] stream_policy={} non_stream_timeout={}",
        channel.priority,
        channel.weight,
        channel.groups.join(", "),
        policy,
        d(non_stream)
    );
    let mapped: Vec<String> = channel
        .models
        .iter()
        .map(|model| match channel.model_mapping.get(model) {
            Some(upstream) => format!("{model}->{upstream}"),
            None => model.clone(),
        })
        .collect();
    let _ = writeln!(
        out,
        "    models=[{}] paths=[{}]",
        mapped.join(", "),
        channel.paths.join(", ")
    );
    resilience(out, &channel.resilience);
}

/// ` api_version=...` for an azure channel, "" otherwise.
fn api_version(channel: &crate::config::model::Channel) -> String {
    if channel.api_version.is_empty() {
        String::new()
    } else {
        format!(" api_version={}", channel.api_version)
    }
}
