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
    let mut unknown_section = false;
    for (key, v) in top {
        let name = key.as_str();
        match name {
            "listen" => raw.listen = optional(v, name, errs),
            "tls" => raw.tls = optional(v, name, errs),
            "admin" => raw.admin = section(v, name, errs),
            "storage" => raw.storage = section(v, name, errs),
            "shared" => raw.shared = section(v, name, errs),
            "debug_headers" => raw.debug_headers = optional(v, name, errs),
            "limits" => raw.limits = section(v, name, errs),
            "timeouts" => raw.timeouts = section(v, name, errs),
            "routing" => raw.routing = section(v, name, errs),
            "auto_groups" => raw.auto_groups = optional(v, name, errs),
            "resilience" => raw.resilience = section(v, name, errs),
            "auto_disable" => raw.auto_disable = section(v, name, errs),
            "images_failover" => raw.images_failover = section(v, name, errs),
            "channels" => raw.channels = entries(v, name, errs),
            "virtual_models" => raw.virtual_models = entries(v, name, errs),
            "affinity" => raw.affinity = section(v, name, errs),
            "clients" => raw.clients = entries(v, name, errs),
            "groups" => raw.groups = entries(v, name, errs),
            "pricing" => raw.pricing = entries(v, name, errs),
            "tasks" => raw.tasks = section(v, name, errs),
            "telemetry" => raw.telemetry = section(v, name, errs),
            _ => {
                errs.push(name, unknown_key(name, SECTIONS));
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
            Some(Value::Object(m)) => m,
            Some(_) => return None,
        };
        for entry in entries.values() {
            match entry.get("groups") {
                None | Some(Value::Null) => {
                    out.insert("default".to_string());
                }
                Some(Value::String(g)) => {
                    out.insert(g.clone());
                }
                Some(Value::Array(items)) => {
                    for g in items {
                        out.insert(g.as_str()?.to_string());
                    }
                }
                Some(_) => return None,
            }
        }
    }
    Some(out)
}
