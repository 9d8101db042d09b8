//! Raw tree → typed [`Config`]: defaults, scalar checks and the global sections (R2.3).
//! Channels, virtual models and clients are in `validate_channels`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::Collector;
use super::merge::{default_resilience, overlay};
use super::model::*;
use super::raw::{RawAffinity, RawConfig, RawPrice, RawRule};
use super::scalars::{builtin_set, choice, dur, dur_nonzero, float_in, names, v1_path};
use super::validate_channels::{channels, clients, cross_check, virtual_models};
use crate::secret::Secret;

const HOUR: Duration = Duration::from_secs(3600);

fn socket(c: &mut Collector, key: &str, v: &Option<String>, default: &str) -> SocketAddr {
    let fallback = SocketAddr::from(([127, 0, 0, 1], 0));
    let s = v.as_deref().unwrap_or(default);
    match s.trim().parse::<SocketAddr>() {
        Ok(a) => a,
        Err(_) => {
            c.push(key, format!("{s:?} is not an IP:port address"));
            default.parse().unwrap_or(fallback)
        }
    }
}

/// Build the typed config; every problem goes into `c`.
pub(crate) fn build(raw: RawConfig, source: &Path, c: &mut Collector) -> Config {
    let tls = raw.tls.as_ref().and_then(|t| match (&t.cert, &t.key) {
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
            c.push(format!("tls.{missing}"), "tls needs both cert and key");
            None
        }
    });
    let admin = Admin {
        listen: socket(c, "admin.listen", &raw.admin.listen, "127.0.0.1:9090"),
        token: raw
            .admin
            .token
            .as_ref()
            .filter(|t| !t.trim().is_empty())
            .map(Secret::new),
    };
    let storage = super::validate_storage::storage(&raw.storage, c);
    let lim = &raw.limits;
    let limits = Limits {
        max_body_bytes: positive(c, "limits.max_body_bytes", lim.max_body_bytes, 33_554_432),
        header_read_timeout: dur_nonzero(
            c,
            "limits.header_read_timeout",
            &lim.header_read_timeout,
            Duration::from_secs(10),
        ),
        max_connections: positive(c, "limits.max_connections", lim.max_connections, 10_000)
            as usize,
        idle_timeout: dur_nonzero(
            c,
            "limits.idle_timeout",
            &lim.idle_timeout,
            Duration::from_secs(120),
        ),
        max_connections_per_ip: lim.max_connections_per_ip.unwrap_or(0) as usize,
    };
    let t = &raw.timeouts;
    let s = Duration::from_secs;
    let timeouts = Timeouts {
        upstream_header: dur_nonzero(c, "timeouts.upstream_header", &t.upstream_header, s(60)),
        image_upstream_header: dur_nonzero(
            c,
            "timeouts.image_upstream_header",
            &t.image_upstream_header,
            s(300),
        ),
        first_byte: dur_nonzero(c, "timeouts.first_byte", &t.first_byte, s(30)),
        keepalive: dur(c, "timeouts.keepalive", &t.keepalive, s(15)),
        non_stream: dur_nonzero(c, "timeouts.non_stream", &t.non_stream, s(600)),
        request_deadline: dur_nonzero(c, "timeouts.request_deadline", &t.request_deadline, s(900)),
        drain: dur(c, "timeouts.drain", &t.drain, s(30)),
    };
    let r = &raw.routing;
    let rb = r.retry_budget.as_ref();
    let routing = Routing {
        retry_times: r.retry_times.unwrap_or(3),
        tier_walk: choice(
            c,
            "routing.tier_walk",
            &r.tier_walk,
            &[
                ("exhaust", TierWalk::Exhaust),
                ("one_per_tier", TierWalk::OnePerTier),
            ],
            TierWalk::Exhaust,
        ),
        failover_on: super::scalars::status_set(
            c,
            "routing.failover_on",
            &r.failover_on,
            &builtin_set("100-199,300-399,401-407,409-499,500-503,505-523,525-599"),
        ),
        never_failover_on: super::scalars::status_set(
            c,
            "routing.never_failover_on",
            &r.never_failover_on,
            &builtin_set("504,524"),
        ),
        retry_budget: RetryBudget {
            ratio: float_in(
                c,
                "routing.retry_budget.ratio",
                rb.and_then(|b| b.ratio),
                0.0,
                1.0,
                0.2,
            ),
            min_per_second: rb.and_then(|b| b.min_per_second).unwrap_or(10),
            ttl: dur_nonzero(
                c,
                "routing.retry_budget.ttl",
                &rb.and_then(|b| b.ttl.clone()),
                s(10),
            ),
        },
    };
    let resilience = overlay(&default_resilience(), &raw.resilience, "resilience", c);
    let ad = &raw.auto_disable;
    let auto_disable = AutoDisable {
        enabled: ad.enabled.unwrap_or(true),
        auto_enable: ad.auto_enable.unwrap_or(true),
        statuses: super::scalars::status_set(
            c,
            "auto_disable.statuses",
            &ad.statuses,
            &builtin_set("401"),
        ),
        error_codes: names(
            c,
            "auto_disable.error_codes",
            &ad.error_codes,
            &[
                "invalid_api_key",
                "account_deactivated",
                "billing_not_active",
                "Arrearage",
            ],
        ),
        error_types: names(
            c,
            "auto_disable.error_types",
            &ad.error_types,
            &[
                "insufficient_quota",
                "authentication_error",
                "permission_error",
                "forbidden",
            ],
        ),
        keywords: names(c, "auto_disable.keywords", &ad.keywords, &[]),
        probe_interval: dur_nonzero(c, "auto_disable.probe_interval", &ad.probe_interval, s(60)),
    };
    let im = &raw.images_failover;
    let images_failover = ImagesFailover {
        enabled: im.enabled.unwrap_or(false),
        include_ambiguous: im.include_ambiguous.unwrap_or(false),
        include_uncertain: im.include_uncertain.unwrap_or(false),
        key_retry_budget: im.key_retry_budget.unwrap_or(1),
    };
    let chans = channels(&raw.channels, &resilience, c);
    let vms = virtual_models(&raw.virtual_models, &raw.channels, &chans, c);
    let cls = clients(&raw.clients, c);
    let auto_groups = names(c, "auto_groups", &raw.auto_groups, &[]);
    cross_check(raw.declared_groups.as_ref(), &cls, &auto_groups, c);
    let mut tasks = Tasks::default();
    for (i, p) in raw.tasks.paths.iter().flatten().enumerate() {
        if v1_path(c, &format!("tasks.paths[{i}]"), p) {
            tasks.paths.push(p.trim_end_matches('/').to_string());
        }
    }
    Config {
        source: source.to_path_buf(),
        listen: socket(c, "listen", &raw.listen, "127.0.0.1:8080"),
        tls,
        admin,
        storage,
        debug_headers: raw.debug_headers.unwrap_or(false),
        limits,
        timeouts,
        routing,
        auto_groups,
        resilience,
        auto_disable,
        images_failover,
        channels: chans,
        virtual_models: vms,
        affinity: affinity(&raw.affinity, c),
        clients: cls,
        pricing: pricing(&raw.pricing, c),
        tasks,
        shared: super::validate_shared::shared(&raw.shared, c),
    }
}

fn positive(c: &mut Collector, key: &str, v: Option<u64>, default: u64) -> u64 {
    match v {
        Some(0) => {
            c.push(key, "must be greater than zero");
            default
        }
        Some(n) => n,
        None => default,
    }
}

fn pricing(raw: &[(String, Option<RawPrice>)], c: &mut Collector) -> BTreeMap<String, Price> {
    let mut out = BTreeMap::new();
    for (model, p) in raw {
        let Some(p) = p else { continue };
        let key = format!("pricing.{model}");
        let input = float_in(
            c,
            &format!("{key}.input"),
            Some(p.input),
            0.0,
            f64::INFINITY,
            0.0,
        );
        let output = float_in(
            c,
            &format!("{key}.output"),
            Some(p.output),
            0.0,
            f64::INFINITY,
            0.0,
        );
        let mut cache = |name: &str, v: Option<f64>| {
            v.map(|v| {
                float_in(
                    c,
                    &format!("{key}.{name}"),
                    Some(v),
                    0.0,
                    f64::INFINITY,
                    0.0,
                )
            })
        };
        let cache_read = cache("cache_read", p.cache_read);
        let cache_write = cache("cache_write", p.cache_write);
        out.insert(
            model.clone(),
            Price {
                input,
                output,
                cache_read,
                cache_write,
            },
        );
    }
    out
}

/// The two rules of R8.1, used when the file has no `affinity.rules`.
pub fn default_affinity_rules() -> Vec<AffinityRule> {
    let mk = |name: &str, model: &str, path: &str, key: &[&str]| {
        regex::Regex::new(model).ok().map(|re| AffinityRule {
            name: name.into(),
            model: re,
            path: path.into(),
            key: AffinityKey::Body(key.iter().map(|s| s.to_string()).collect()),
            ttl: 2 * HOUR,
            skip_retry_on_failure: false,
        })
    };
    [
        mk(
            "codex trace",
            "^gpt-.*$",
            "/v1/responses",
            &["prompt_cache_key"],
        ),
        mk(
            "claude user",
            "^claude-.*$",
            "/v1/messages",
            &["metadata", "user_id"],
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn rule(i: usize, r: &RawRule, c: &mut Collector) -> Option<AffinityRule> {
    let key = |f: &str| format!("affinity.rules[{i}].{f}");
    let mut ok = true;
    let mut required = |c: &mut Collector, f: &str, v: &Option<String>| -> String {
        match v.as_deref().map(str::trim) {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => {
                c.push(key(f), "required");
                ok = false;
                String::new()
            }
        }
    };
    let model_src = required(c, "model", &r.model);
    let path = required(c, "path", &r.path);
    let key_src = required(c, "key", &r.key);
    if !ok {
        return None;
    }
    let model = regex::Regex::new(&model_src)
        .map_err(|e| c.push(key("model"), format!("invalid regex: {e}")))
        .ok();
    if !path.starts_with('/') {
        c.push(key("path"), format!("path {path:?} must start with /"));
    }
    let akey = if let Some(p) = key_src.strip_prefix("body.") {
        let parts: Vec<String> = p.split('.').map(str::to_string).collect();
        if parts.iter().any(|s| s.is_empty()) {
            c.push(key("key"), format!("{key_src:?} has an empty path segment"));
            None
        } else {
            Some(AffinityKey::Body(parts))
        }
    } else if let Some(h) = key_src.strip_prefix("header.") {
        http::HeaderName::from_bytes(h.to_ascii_lowercase().as_bytes())
            .map_err(|_| c.push(key("key"), format!("{h:?} is not a valid header name")))
            .ok()
            .map(AffinityKey::Header)
    } else {
        c.push(
            key("key"),
            format!("{key_src:?} must be body.<json path> or header.<name>"),
        );
        None
    };
    let ttl = dur_nonzero(c, &key("ttl"), &r.ttl, 2 * HOUR);
    Some(AffinityRule {
        name: r
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| format!("rule-{i}")),
        model: model?,
        path,
        key: akey?,
        ttl,
        skip_retry_on_failure: r.skip_retry_on_failure.unwrap_or(false),
    })
}

fn affinity(raw: &RawAffinity, c: &mut Collector) -> Affinity {
    let rules = match &raw.rules {
        None => default_affinity_rules(),
        Some(list) => list
            .iter()
            .enumerate()
            .filter_map(|(i, r)| rule(i, r, c))
            .collect(),
    };
    let st = raw.sticky.as_ref();
    let get = |f: fn(&super::raw::RawSticky) -> &Option<String>| st.and_then(|s| f(s).clone());
    let sticky = Sticky {
        conversation_ttl: dur_nonzero(
            c,
            "affinity.sticky.conversation_ttl",
            &get(|s| &s.conversation_ttl),
            2 * HOUR,
        ),
        session_ttl: dur_nonzero(
            c,
            "affinity.sticky.session_ttl",
            &get(|s| &s.session_ttl),
            2 * HOUR,
        ),
        user_model_ttl: dur_nonzero(
            c,
            "affinity.sticky.user_model_ttl",
            &get(|s| &s.user_model_ttl),
            Duration::from_secs(1800),
        ),
        bucket_ttl: dur_nonzero(
            c,
            "affinity.sticky.bucket_ttl",
            &get(|s| &s.bucket_ttl),
            Duration::from_secs(600),
        ),
    };
    Affinity { rules, sticky }
}
