//! Splits the merged tree into raw sections, deserializing each section (and each entry of
//! `channels`, `clients`, `virtual_models`, `pricing`) on its own so every error is collected.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::error::Collector;
use crate::config::load::lenient::{from_value, unknown_key};
use crate::config::load::raw::RawConfig;
use crate::config::load::source::SECTIONS;

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

fn section<T: DeserializeOwned + Default>(
    value: &Value,
    key: &str,
    collector: &mut Collector,
) -> T {
    if value.is_null() {
        return T::default();
    }
    match from_value::<T>(value) {
        Ok(typed) => typed,
        Err((rel, reason)) => {
            collector.push(join(key, &rel), reason);
            T::default()
        }
    }
}

fn optional<T: DeserializeOwned>(value: &Value, key: &str, collector: &mut Collector) -> Option<T> {
    match from_value::<Option<T>>(value) {
        Ok(typed) => typed,
        Err((rel, reason)) => {
            collector.push(join(key, &rel), reason);
            None
        }
    }
}

/// A name-keyed map section: one entry per name, each deserialized alone.
fn entries<T: DeserializeOwned>(
    value: &Value,
    key: &str,
    collector: &mut Collector,
) -> Vec<(String, Option<T>)> {
    let map = match value {
        Value::Null => return Vec::new(),
        Value::Object(object) => object,
        _ => {
            collector.push(key, "expected a mapping of name → settings");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (name, entry) in map {
        let path = format!("{key}.{name}");
        if name.trim().is_empty() {
            collector.push(&path, "name must not be empty");
        }
        let parsed = if entry.is_null() {
            collector.push(&path, "settings missing");
            None
        } else {
            match from_value::<T>(entry) {
                Ok(typed) => Some(typed),
                Err((rel, reason)) => {
                    collector.push(join(&path, &rel), reason);
                    None
                }
            }
        };
        out.push((name.clone(), parsed));
    }
    out
}

pub(crate) fn split(tree: &Value, collector: &mut Collector) -> RawConfig {
    let mut raw = RawConfig::default();
    let Value::Object(top) = tree else {
        return raw;
    };
    let mut unknown_section = false;
    for (key, value) in top {
        let name = key.as_str();
        match name {
            "listen" => raw.listen = optional(value, name, collector),
            "tls" => raw.tls = optional(value, name, collector),
            "admin" => raw.admin = section(value, name, collector),
            "storage" => raw.storage = section(value, name, collector),
            "shared" => raw.shared = section(value, name, collector),
            "debug_headers" => raw.debug_headers = optional(value, name, collector),
            "limits" => raw.limits = section(value, name, collector),
            "timeouts" => raw.timeouts = section(value, name, collector),
            "routing" => raw.routing = section(value, name, collector),
            "auto_groups" => raw.auto_groups = optional(value, name, collector),
            "resilience" => raw.resilience = section(value, name, collector),
            "auto_disable" => raw.auto_disable = section(value, name, collector),
            "images_failover" => raw.images_failover = section(value, name, collector),
            "channels" => raw.channels = entries(value, name, collector),
            "virtual_models" => raw.virtual_models = entries(value, name, collector),
            "affinity" => raw.affinity = section(value, name, collector),
            "clients" => raw.clients = entries(value, name, collector),
            "groups" => raw.groups = entries(value, name, collector),
            "pricing" => raw.pricing = entries(value, name, collector),
            "tasks" => raw.tasks = section(value, name, collector),
            "telemetry" => raw.telemetry = section(value, name, collector),
            _ => {
                collector.push(name, unknown_key(name, SECTIONS));
                unknown_section = true;
            }
        }
    }
    // An unknown section may be the misspelled one that declares groups: then groups are
    // not cross-checked, so one typo is one error.
    raw.declared_groups = if unknown_section {
        None
    } else {
        declared_groups(top)
    };
    raw
}

/// Every group the file's channels and virtual models declare, read from the tree as
/// written, so an entry that failed to deserialize still declares its groups (no follow-on
/// errors). `None` when some entry's `groups` cannot be read at all.
fn declared_groups(top: &Map<String, Value>) -> Option<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for section in ["channels", "virtual_models"] {
        let entries = match top.get(section) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(object)) => object,
            Some(_) => return None,
        };
        for entry in entries.values() {
            match entry.get("groups") {
                None | Some(Value::Null) => {
                    out.insert("default".to_string());
                }
                Some(Value::String(group)) => {
                    out.insert(group.clone());
                }
                Some(Value::Array(items)) => {
                    for group in items {
                        out.insert(group.as_str()?.to_string());
                    }
                }
                Some(_) => return None,
            }
        }
    }
    Some(out)
}
