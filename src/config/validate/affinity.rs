//! The `affinity` section (R8.1, R8.2): rules (a model regex, a path, a body or header key,
//! a TTL) and the sticky ladder's TTLs; the two default rules when the file has none.

use std::time::Duration;

use crate::config::error::Collector;
use crate::config::load::raw::{RawAffinity, RawRule};
use crate::config::load::scalars::dur_nonzero;
use crate::config::model::{Affinity, AffinityKey, AffinityRule, Sticky};

const HOUR: Duration = Duration::from_secs(3600);

/// The two rules of R8.1, used when the file has no `affinity.rules`.
pub fn default_affinity_rules() -> Vec<AffinityRule> {
    let make_rule = |name: &str, model: &str, path: &str, key: &[&str]| {
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
        make_rule(
            "codex trace",
            "^gpt-.*$",
            "/v1/responses",
            &["prompt_cache_key"],
        ),
        make_rule(
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

fn rule(i: usize, raw: &RawRule, collector: &mut Collector) -> Option<AffinityRule> {
    let key = |field: &str| format!("affinity.rules[{i}].{field}");
    let mut ok = true;
    let mut required = |collector: &mut Collector, field: &str, value: &Option<String>| -> String {
        match value.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => text.to_string(),
            _ => {
                collector.push(key(field), "required");
                ok = false;
                String::new()
            }
        }
    };
    let model_src = required(collector, "model", &raw.model);
    let path = required(collector, "path", &raw.path);
    let key_src = required(collector, "key", &raw.key);
    if !ok {
        return None;
    }
    let model = regex::Regex::new(&model_src)
        .map_err(|e| collector.push(key("model"), format!("invalid regex: {e}")))
        .ok();
    if !path.starts_with('/') {
        collector.push(key("path"), format!("path {path:?} must start with /"));
    }
    let affinity_key = if let Some(json_path) = key_src.strip_prefix("body.") {
        let parts: Vec<String> = json_path.split('.').map(str::to_string).collect();
        if parts.iter().any(|segment| segment.is_empty()) {
            collector.push(key("key"), format!("{key_src:?} has an empty path segment"));
            None
        } else {
            Some(AffinityKey::Body(parts))
        }
    } else if let Some(header) = key_src.strip_prefix("header.") {
        http::HeaderName::from_bytes(header.to_ascii_lowercase().as_bytes())
            .map_err(|_| {
                collector.push(key("key"), format!("{header:?} is not a valid header name"))
            })
            .ok()
            .map(AffinityKey::Header)
    } else {
        collector.push(
            key("key"),
            format!("{key_src:?} must be body.<json path> or header.<name>"),
        );
        None
    };
    let ttl = dur_nonzero(collector, &key("ttl"), &raw.ttl, 2 * HOUR);
    Some(AffinityRule {
        name: raw
            .name
            .clone()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| format!("rule-{i}")),
        model: model?,
        path,
        key: affinity_key?,
        ttl,
        skip_retry_on_failure: raw.skip_retry_on_failure.unwrap_or(false),
    })
}

pub(crate) fn affinity(raw: &RawAffinity, collector: &mut Collector) -> Affinity {
    let rules = match &raw.rules {
        None => default_affinity_rules(),
        Some(list) => list
            .iter()
            .enumerate()
            .filter_map(|(i, raw_rule)| rule(i, raw_rule, collector))
            .collect(),
    };
    let raw_sticky = raw.sticky.as_ref();
    let get = |field: fn(&crate::config::load::raw::RawSticky) -> &Option<String>| {
        raw_sticky.and_then(|sticky| field(sticky).clone())
    };
    let sticky = Sticky {
        conversation_ttl: dur_nonzero(
            collector,
            "affinity.sticky.conversation_ttl",
            &get(|raw_sticky| &raw_sticky.conversation_ttl),
            2 * HOUR,
        ),
        session_ttl: dur_nonzero(
            collector,
            "affinity.sticky.session_ttl",
            &get(|raw_sticky| &raw_sticky.session_ttl),
            2 * HOUR,
        ),
        user_model_ttl: dur_nonzero(
            collector,
            "affinity.sticky.user_model_ttl",
            &get(|raw_sticky| &raw_sticky.user_model_ttl),
            Duration::from_secs(1800),
        ),
        bucket_ttl: dur_nonzero(
            collector,
            "affinity.sticky.bucket_ttl",
            &get(|raw_sticky| &raw_sticky.bucket_ttl),
            Duration::from_secs(600),
        ),
    };
    Affinity { rules, sticky }
}
