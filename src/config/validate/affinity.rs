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

pub(crate) fn affinity(raw: &RawAffinity, c: &mut Collector) -> Affinity {
    let rules = match &raw.rules {
        None => default_affinity_rules(),
        Some(list) => list
            .iter()
            .enumerate()
            .filter_map(|(i, r)| rule(i, r, c))
            .collect(),
    };
    let st = raw.sticky.as_ref();
    let get = |f: fn(&crate::config::load::raw::RawSticky) -> &Option<String>| {
        st.and_then(|s| f(s).clone())
    };
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
