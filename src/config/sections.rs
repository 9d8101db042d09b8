//! Splits the merged tree into raw sections, deserializing each section (and each entry of
//! `channels`, `clients`, `virtual_models`, `pricing`) on its own so every error is collected.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::Collector;
use super::lenient::from_value;
use super::raw::RawConfig;
use super::source::SECTIONS;

/// `prefix` + a path relative to it.
pub(crate) fn join(prefix: &str, rel: &str) -> String {
    if rel.is_empty() {
        prefix.to_string()
    } else if prefix.is_empty() {
        rel.to_string()
    } else if rel.starts_with('[') {
        format!("{prefix}{rel}")
    } else {
        format!("{prefix}.{rel}")
    }
}

fn section<T: DeserializeOwned + Default>(v: &Value, key: &str, errs: &mut Collector) -> T {
    if v.is_null() {
        return T::default();
    }
    match from_value::<T>(v) {
        Ok(t) => t,
        Err((rel, reason)) => {
            errs.push(join(key, &rel), reason);
            T::default()
        }
    }
}

fn optional<T: DeserializeOwned>(v: &Value, key: &str, errs: &mut Collector) -> Option<T> {
    match from_value::<Option<T>>(v) {
        Ok(t) => t,
        Err((rel, reason)) => {
            errs.push(join(key, &rel), reason);
            None
        }
    }
}

/// A name-keyed map section: one entry per name, each deserialized alone.
fn entries<T: DeserializeOwned>(
    v: &Value,
    key: &str,
    errs: &mut Collector,
) -> Vec<(String, Option<T>)> {
    let map = match v {
        Value::Null => return Vec::new(),
        Value::Object(m) => m,
        _ => {
            errs.push(key, "expected a mapping of name → settings");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (name, entry) in map {
        let path = format!("{key}.{name}");
        if name.trim().is_empty() {
            errs.push(&path, "name must not be empty");
        }
        let parsed = if entry.is_null() {
            errs.push(&path, "settings missing");
            None
        } else {
            match from_value::<T>(entry) {
                Ok(t) => Some(t),
                Err((rel, reason)) => {
                    errs.push(join(&path, &rel), reason);
                    None
                }
            }
        };
        out.push((name.clone(), parsed));
    }
    out
}

pub(crate) fn split(tree: &Value, errs: &mut Collector) -> RawConfig {
    let mut raw = RawConfig::default();
    let Value::Object(top) = tree else {
        return raw;
    };
    for (key, v) in top {
        let k = key.as_str();
        match k {
            "listen" => raw.listen = optional(v, k, errs),
            "tls" => raw.tls = optional(v, k, errs),
            "admin" => raw.admin = section(v, k, errs),
            "storage" => raw.storage = section(v, k, errs),
            "debug_headers" => raw.debug_headers = optional(v, k, errs),
            "limits" => raw.limits = section(v, k, errs),
            "timeouts" => raw.timeouts = section(v, k, errs),
            "routing" => raw.routing = section(v, k, errs),
            "auto_groups" => raw.auto_groups = optional(v, k, errs),
            "resilience" => raw.resilience = section(v, k, errs),
            "auto_disable" => raw.auto_disable = section(v, k, errs),
            "images_failover" => raw.images_failover = section(v, k, errs),
            "channels" => raw.channels = entries(v, k, errs),
            "virtual_models" => raw.virtual_models = entries(v, k, errs),
            "affinity" => raw.affinity = section(v, k, errs),
            "clients" => raw.clients = entries(v, k, errs),
            "pricing" => raw.pricing = entries(v, k, errs),
            "tasks" => raw.tasks = section(v, k, errs),
            _ => errs.push(
                k,
                format!("unknown key; expected one of {}", SECTIONS.join(", ")),
            ),
        }
    }
    raw
}
