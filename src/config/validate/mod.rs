//! Raw tree → typed [`Config`]: defaults, scalar checks and the global sections (R2.3).
//! Channels, virtual models and clients are in `validate_channels`.

pub(in crate::config) mod affinity;
pub(in crate::config) mod channel;
pub(in crate::config) mod channels;
pub mod limits;
pub(in crate::config) mod shared;
pub mod storage;
pub(in crate::config) mod telemetry;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::error::Collector;
use crate::config::load::raw::{RawConfig, RawPrice};
use crate::config::load::scalars::{
    builtin_set, choice, dur, dur_nonzero, float_in, names, v1_path,
};
use crate::config::merge::{default_resilience, overlay};
use crate::config::model::*;
use crate::config::validate::affinity::affinity;
use crate::config::validate::channels::{channels, clients, cross_check, virtual_models};
use crate::secret::Secret;

fn socket(
    collector: &mut Collector,
    key: &str,
    value: &Option<String>,
    default: &str,
) -> SocketAddr {
    let fallback = SocketAddr::from(([127, 0, 0, 1], 0));
    let given = value.as_deref().unwrap_or(default);
    match given.trim().parse::<SocketAddr>() {
        Ok(address) => address,
        Err(_) => {
            collector.push(key, format!("{given:?} is not an IP:port address"));
            default.parse().unwrap_or(fallback)
        }
    }
}

/// Build the typed config; every problem goes into `collector`.
pub(crate) fn build(raw: RawConfig, source: &Path, collector: &mut Collector) -> Config {
    // Sections are read in file order, so errors on the same line keep that order.
    let tls = tls(&raw, collector);
    let admin = admin(&raw, collector);
    let storage = crate::config::validate::storage::storage(&raw.storage, collector);
    let limits = limits(&raw, collector);
    let timeouts = timeouts(&raw, collector);
    let routing = routing(&raw, collector);
    let resilience = overlay(
        &default_resilience(),
        &raw.resilience,
        "resilience",
        collector,
    );
    let auto_disable = auto_disable(&raw, collector);
    let images_failover = images_failover(&raw);
    let channels = channels(&raw.channels, &resilience, collector);
    let virtual_models = virtual_models(
        &raw.virtual_models,
        &raw.channels,
        &channels,
        &resilience.stream_resume,
        collector,
    );
    let clients = client_limits(&raw, clients(&raw.clients, collector), collector);
    let auto_groups = names(collector, "auto_groups", &raw.auto_groups, &[]);
    cross_check(
        raw.declared_groups.as_ref(),
        &clients,
        &auto_groups,
        collector,
    );
    let tasks = tasks(&raw, collector);
    Config {
        source: source.to_path_buf(),
        listen: socket(collector, "listen", &raw.listen, "127.0.0.1:8080"),
        tls,
        admin,
        storage,
        debug_headers: raw.debug_headers.unwrap_or(false),
        limits,
        timeouts,
        routing,
        auto_groups: auto_groups.iter().map(|g| Arc::from(g.as_str())).collect(),
        resilience,
        auto_disable,
        images_failover,
        channels,
        virtual_models,
        affinity: affinity(&raw.affinity, collector),
        clients,
        pricing: pricing(&raw.pricing, collector),
        tasks,
        shared: crate::config::validate::shared::shared(&raw.shared, collector),
        telemetry: crate::config::validate::telemetry::telemetry(&raw.telemetry, collector),
    }
}

fn tls(raw: &RawConfig, collector: &mut Collector) -> Option<TlsFiles> {
    raw.tls
        .as_ref()
        .and_then(|raw_tls| match (&raw_tls.cert, &raw_tls.key) {
            (Some(cert), Some(key)) if !cert.trim().is_empty() && !key.trim().is_empty() => {
                Some(TlsFiles {
                    cert: PathBuf::from(cert),
                    key: PathBuf::from(key),
                })
            }
            (cert, _) => {
                let missing = if cert.as_deref().is_none_or(|s| s.trim().is_empty()) {
                    "cert"
                } else {
                    "key"
                };
                collector.push(format!("tls.{missing}"), "tls needs both cert and key");
                None
            }
        })
}

fn admin(raw: &RawConfig, collector: &mut Collector) -> Admin {
    let token = |value: &Option<String>| {
        value
            .as_ref()
            .filter(|token| !token.trim().is_empty())
            .map(Secret::new)
    };
    Admin {
        listen: socket(
            collector,
            "admin.listen",
            &raw.admin.listen,
            "127.0.0.1:9090",
        ),
        token: token(&raw.admin.token),
        status_token: token(&raw.admin.status_token),
    }
}

fn limits(raw: &RawConfig, collector: &mut Collector) -> Limits {
    let raw_limits = &raw.limits;
    Limits {
        max_body_bytes: positive(
            collector,
            "limits.max_body_bytes",
            raw_limits.max_body_bytes,
            33_554_432,
        ),
        header_read_timeout: dur_nonzero(
            collector,
            "limits.header_read_timeout",
            &raw_limits.header_read_timeout,
            Duration::from_secs(10),
        ),
        max_connections: positive(
            collector,
            "limits.max_connections",
            raw_limits.max_connections,
            10_000,
        ) as usize,
        idle_timeout: dur_nonzero(
            collector,
            "limits.idle_timeout",
            &raw_limits.idle_timeout,
            Duration::from_secs(120),
        ),
        max_connections_per_ip: raw_limits.max_connections_per_ip.unwrap_or(0) as usize,
    }
}

fn timeouts(raw: &RawConfig, collector: &mut Collector) -> Timeouts {
    let timeouts = &raw.timeouts;
    let secs = Duration::from_secs;
    Timeouts {
        upstream_header: dur_nonzero(
            collector,
            "timeouts.upstream_header",
            &timeouts.upstream_header,
            secs(60),
        ),
        image_upstream_header: dur_nonzero(
            collector,
            "timeouts.image_upstream_header",
            &timeouts.image_upstream_header,
            secs(300),
        ),
        first_byte: dur_nonzero(
            collector,
            "timeouts.first_byte",
            &timeouts.first_byte,
            secs(30),
        ),
        keepalive: dur(
            collector,
            "timeouts.keepalive",
            &timeouts.keepalive,
            secs(15),
        ),
        non_stream: dur_nonzero(
            collector,
            "timeouts.non_stream",
            &timeouts.non_stream,
            secs(600),
        ),
        request_deadline: dur_nonzero(
            collector,
            "timeouts.request_deadline",
            &timeouts.request_deadline,
            secs(900),
        ),
        drain: dur(collector, "timeouts.drain", &timeouts.drain, secs(30)),
        stream_stall: dur(
            collector,
            "timeouts.stream_stall",
            &timeouts.stream_stall,
            secs(30),
        ),
        min_tokens_per_second: float_in(
            collector,
            "timeouts.min_tokens_per_second",
            timeouts.min_tokens_per_second,
            0.0,
            10_000.0,
            0.0,
        ),
    }
}

fn routing(raw: &RawConfig, collector: &mut Collector) -> Routing {
    let routing = &raw.routing;
    let raw_budget = routing.retry_budget.as_ref();
    let (balance, max_upstream_cooldown) = crate::config::validate::limits::balance(
        collector,
        &routing.balance,
        &routing.max_upstream_cooldown,
    );
    Routing {
        retry_times: routing.retry_times.unwrap_or(3),
        tier_walk: choice(
            collector,
            "routing.tier_walk",
            &routing.tier_walk,
            &[
                ("exhaust", TierWalk::Exhaust),
                ("one_per_tier", TierWalk::OnePerTier),
            ],
            TierWalk::Exhaust,
        ),
        failover_on: crate::config::load::scalars::status_set(
            collector,
            "routing.failover_on",
            &routing.failover_on,
            &builtin_set("100-199,300-399,401-407,409-499,500-503,505-523,525-599"),
        ),
        never_failover_on: crate::config::load::scalars::status_set(
            collector,
            "routing.never_failover_on",
            &routing.never_failover_on,
            &builtin_set("504,524"),
        ),
        retry_budget: RetryBudget {
            ratio: float_in(
                collector,
                "routing.retry_budget.ratio",
                raw_budget.and_then(|budget| budget.ratio),
                0.0,
                1.0,
                0.2,
            ),
            min_per_second: raw_budget
                .and_then(|budget| budget.min_per_second)
                .unwrap_or(10),
            ttl: dur_nonzero(
                collector,
                "routing.retry_budget.ttl",
                &raw_budget.and_then(|budget| budget.ttl.clone()),
                Duration::from_secs(10),
            ),
        },
        balance,
        max_upstream_cooldown,
        failover_on_codes: failover_on_codes(collector, &routing.failover_on_codes),
        wait_retry_after: dur(
            collector,
            "routing.wait_retry_after",
            &routing.wait_retry_after,
            Duration::ZERO,
        ),
    }
}

/// `routing.failover_on_codes` (default `[context_length_exceeded]`): error codes, each a
/// word of letters, digits, `_`, `-` or `.`.
fn failover_on_codes(collector: &mut Collector, value: &Option<Vec<String>>) -> Vec<String> {
    let Some(list) = value else {
        return vec!["context_length_exceeded".to_string()];
    };
    let mut out = Vec::new();
    for (i, code) in list.iter().enumerate() {
        let ok = !code.is_empty()
            && code
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
        if ok {
            out.push(code.clone());
        } else {
            collector.push(
                format!("routing.failover_on_codes[{i}]"),
                format!("{code:?} is not an error code (letters, digits, _, -, .)"),
            );
        }
    }
    out
}

/// R15.1: each client's effective limits (its own fields over its group's); a `groups`
/// entry must name a group some channel or virtual model declares (or `auto`).
fn client_limits(
    raw: &RawConfig,
    mut clients: Vec<Client>,
    collector: &mut Collector,
) -> Vec<Client> {
    use limits as vl;
    for (name, _) in &raw.groups {
        let declared = raw.declared_groups.as_ref();
        if name != "auto" && declared.is_some_and(|d| !d.contains(name)) {
            collector.push(
                format!("groups.{name}"),
                format!("no channel or virtual model declares group {name:?}"),
            );
        }
    }
    let groups = vl::groups(&raw.groups, collector);
    for client in &mut clients {
        let own = raw
            .clients
            .iter()
            .find(|(name, _)| **name == *client.name)
            .and_then(|(_, raw_client)| raw_client.as_ref()?.limits.as_ref());
        client.limits = vl::client_limits(&client.name, own, groups.get(&*client.group), collector);
    }
    clients
}

fn auto_disable(raw: &RawConfig, collector: &mut Collector) -> AutoDisable {
    let raw_auto_disable = &raw.auto_disable;
    AutoDisable {
        enabled: raw_auto_disable.enabled.unwrap_or(true),
        auto_enable: raw_auto_disable.auto_enable.unwrap_or(true),
        statuses: crate::config::load::scalars::status_set(
            collector,
            "auto_disable.statuses",
            &raw_auto_disable.statuses,
            &builtin_set("401"),
        ),
        error_codes: names(
            collector,
            "auto_disable.error_codes",
            &raw_auto_disable.error_codes,
            &[
                "invalid_api_key",
                "account_deactivated",
                "billing_not_active",
                "Arrearage",
            ],
        ),
        error_types: names(
            collector,
            "auto_disable.error_types",
            &raw_auto_disable.error_types,
            &[
                "insufficient_quota",
                "authentication_error",
                "permission_error",
                "forbidden",
            ],
        ),
        keywords: names(
            collector,
            "auto_disable.keywords",
            &raw_auto_disable.keywords,
            &[],
        ),
        probe_interval: dur_nonzero(
            collector,
            "auto_disable.probe_interval",
            &raw_auto_disable.probe_interval,
            Duration::from_secs(60),
        ),
    }
}

fn images_failover(raw: &RawConfig) -> ImagesFailover {
    let raw_images_failover = &raw.images_failover;
    ImagesFailover {
        enabled: raw_images_failover.enabled.unwrap_or(false),
        include_ambiguous: raw_images_failover.include_ambiguous.unwrap_or(false),
        include_uncertain: raw_images_failover.include_uncertain.unwrap_or(false),
        key_retry_budget: raw_images_failover.key_retry_budget.unwrap_or(1),
    }
}

fn tasks(raw: &RawConfig, collector: &mut Collector) -> Tasks {
    let mut tasks = Tasks::default();
    for (i, path) in raw.tasks.paths.iter().flatten().enumerate() {
        if v1_path(collector, &format!("tasks.paths[{i}]"), path) {
            tasks.paths.push(path.trim_end_matches('/').to_string());
        }
    }
    tasks
}

fn positive(collector: &mut Collector, key: &str, value: Option<u64>, default: u64) -> u64 {
    match value {
        Some(0) => {
            collector.push(key, "must be greater than zero");
            default
        }
        Some(number) => number,
        None => default,
    }
}

fn pricing(
    raw: &[(String, Option<RawPrice>)],
    collector: &mut Collector,
) -> BTreeMap<String, Price> {
    let mut out = BTreeMap::new();
    for (model, entry) in raw {
        let Some(price) = entry else { continue };
        let key = format!("pricing.{model}");
        let input = float_in(
            collector,
            &format!("{key}.input"),
            Some(price.input),
            0.0,
            f64::INFINITY,
            0.0,
        );
        let output = float_in(
            collector,
            &format!("{key}.output"),
            Some(price.output),
            0.0,
            f64::INFINITY,
            0.0,
        );
        let mut cache = |name: &str, value: Option<f64>| {
            value.map(|rate| {
                float_in(
                    collector,
                    &format!("{key}.{name}"),
                    Some(rate),
                    0.0,
                    f64::INFINITY,
                    0.0,
                )
            })
        };
        let cache_read = cache("cache_read", price.cache_read);
        let cache_write = cache("cache_write", price.cache_write);
        if price.max_output == Some(0) {
            collector.push(format!("{key}.max_output"), "must be greater than zero");
        }
        out.insert(
            model.clone(),
            Price {
                input,
                output,
                cache_read,
                cache_write,
                max_output: price.max_output.filter(|&n| n > 0),
            },
        );
    }
    out
}
