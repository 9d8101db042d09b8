//! Settings from the environment: `SWITCHYARD_A__B=v` overrides and the seed aliases
//! (R2.1), and where each came from so an error can name its variable.
//!
//! A variable's path segments are matched against the names written in the file: a segment
//! equal to a name, or to the name upper-cased with every character other than a letter,
//! digit or `_` written as `_`, addresses that entry. So `SWITCHYARD_CHANNELS__MOCK_B__WEIGHT`
//! overrides the weight of channel `mock-b`. A segment that matches nothing creates a new
//! entry under its lower-cased spelling.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::config::error::{under, Collector};
use crate::config::load::sections::join;

/// Where values set from the environment came from.
#[derive(Debug, Default, Clone)]
pub(crate) struct Origins {
    /// (key path, variable), in the order applied (a later one wins).
    set: Vec<(String, String)>,
    /// Entries that exist only because a variable named them: (key path, variable).
    created: Vec<(String, String)>,
}

impl Origins {
    /// The variable a value at `key` (or an entry holding it) came from.
    pub(crate) fn var_for(&self, key: &str) -> Option<&str> {
        let set = self.set.iter().rev().find(|(path, _)| under(key, path));
        set.or_else(|| self.created.iter().find(|(path, _)| under(key, path)))
            .map(|(_, var)| var.as_str())
    }
}

pub(crate) fn set_path(root: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = root;
    for parent in parents {
        let entry = node
            .entry(parent.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        match entry {
            Value::Object(object) => node = object,
            _ => return,
        }
    }
    node.insert(last.clone(), value);
}

/// An env value: a `[a, b]` list is parsed as a YAML flow sequence; anything else stays a
/// string (the lenient deserializer turns it into a number/bool where one is expected).
fn env_value(raw: &str) -> Value {
    let trimmed = raw.trim();
    if trimmed.starts_with('[') && trimmed.ends_with(']') {
        if let Ok(list) = serde_saphyr::from_str::<Value>(trimmed) {
            return list;
        }
    }
    Value::String(raw.to_string())
}

/// A name as a variable spells it: lower-cased, anything but `[a-z0-9_]` as `_`.
fn env_spelling(name: &str) -> String {
    name.chars()
        .map(|character| {
            let lower = character.to_ascii_lowercase();
            if lower.is_ascii_alphanumeric() || lower == '_' {
                lower
            } else {
                '_'
            }
        })
        .collect()
}

/// The names of `map` that the lower-cased segment `seg` addresses.
fn matches<'m>(map: &'m Map<String, Value>, seg: &str) -> Vec<&'m String> {
    if let Some((name, _)) = map.get_key_value(seg) {
        return vec![name];
    }
    map.keys()
        .filter(|name| env_spelling(name) == seg)
        .collect()
}

/// `SWITCHYARD_A__B_C=v` → `{a: {b_c: v}}`, with names matched against the file's `yaml`.
pub(crate) fn env_overrides(
    env: &HashMap<String, String>,
    yaml: &Value,
    sections: &[&str],
    collector: &mut Collector,
) -> Value {
    let mut root = Map::new();
    let mut names: Vec<&String> = env.keys().collect();
    names.sort();
    'vars: for name in names {
        let Some(rest) = name.strip_prefix("SWITCHYARD_") else {
            continue;
        };
        let lower = rest.to_ascii_lowercase();
        let segs: Vec<&str> = lower.split("__").collect();
        if segs.iter().any(|segment| segment.is_empty()) || !sections.contains(&segs[0]) {
            tracing::debug!(var = %name, "not a config override; ignored");
            continue;
        }
        let mut node = Some(yaml);
        let mut path: Vec<String> = Vec::new();
        let mut created = None;
        for seg in &segs {
            let key = match node
                .and_then(Value::as_object)
                .map(|object| matches(object, seg))
            {
                Some(found) if found.len() > 1 => {
                    let list: Vec<String> = found.iter().map(|name| format!("{name:?}")).collect();
                    collector.push_env(
                        name,
                        key_path(&path),
                        format!("{seg:?} matches several names here ({}); rename one so they differ in more than `-`, `.` or case", list.join(", ")),
                    );
                    continue 'vars;
                }
                Some(found) if found.len() == 1 => found[0].clone(),
                _ => seg.to_string(),
            };
            node = node.and_then(|parent| parent.get(&key));
            path.push(key);
            if node.is_none() && created.is_none() {
                created = Some(path.len());
            }
        }
        set_path(&mut root, &path, env_value(&env[name]));
        collector.origins.set.push((key_path(&path), name.clone()));
        if let Some(depth) = created.filter(|depth| *depth < path.len()) {
            collector
                .origins
                .created
                .push((key_path(&path[..depth]), name.clone()));
        }
    }
    Value::Object(root)
}

fn key_path(path: &[String]) -> String {
    path.iter()
        .fold(String::new(), |acc, segment| join(&acc, segment))
}

/// Seed variable names (R2.1) → their settings.
const ALIASES: &[(&str, &str)] = &[
    ("IMAGES_FAILOVER_ENABLED", "images_failover.enabled"),
    (
        "IMAGES_FAILOVER_INCLUDE_AMBIGUOUS",
        "images_failover.include_ambiguous",
    ),
    (
        "IMAGES_FAILOVER_INCLUDE_UNCERTAIN",
        "images_failover.include_uncertain",
    ),
    ("CHANNEL_RETRY_TIMES", "images_failover.key_retry_budget"),
    ("RETRY_ON_STATUSES", "resilience.retry.retry_on"),
    ("RETRY_MAX_RETRIES", "resilience.retry.max_retries"),
    ("RETRY_INITIAL_BACKOFF", "resilience.retry.initial_backoff"),
    ("RETRY_MAX_BACKOFF", "resilience.retry.max_backoff"),
    ("RETRY_BACKOFF_FACTOR", "resilience.retry.backoff_factor"),
    ("RETRY_JITTER_FACTOR", "resilience.retry.jitter_factor"),
    (
        "CIRCUIT_BREAKER_FAILURE_ON_STATUSES",
        "resilience.circuit_breaker.failure_on",
    ),
    ("CIRCUIT_BREAKER_SCOPE", "resilience.circuit_breaker.scope"),
    (
        "CIRCUIT_BREAKER_ENABLED",
        "resilience.circuit_breaker.enabled",
    ),
    (
        "CIRCUIT_BREAKER_FAILURE_THRESHOLD",
        "resilience.circuit_breaker.failure_threshold",
    ),
    (
        "CIRCUIT_BREAKER_SUCCESS_THRESHOLD",
        "resilience.circuit_breaker.success_threshold",
    ),
    (
        "CIRCUIT_BREAKER_TIMEOUT",
        "resilience.circuit_breaker.timeout",
    ),
    (
        "CIRCUIT_BREAKER_SLOW_CALL_THRESHOLD",
        "resilience.circuit_breaker.slow_call_threshold",
    ),
];

/// Seed variables given in whole seconds.
const SECONDS_ALIASES: &[(&str, &str)] = &[
    (
        "OUTBOUND_HEADER_TIMEOUT_SECONDS",
        "timeouts.upstream_header",
    ),
    (
        "OUTBOUND_IMAGE_HEADER_TIMEOUT_SECONDS",
        "timeouts.image_upstream_header",
    ),
];

fn split(key: &str) -> Vec<String> {
    key.split('.').map(str::to_string).collect()
}

pub(crate) fn alias_overrides(env: &HashMap<String, String>, collector: &mut Collector) -> Value {
    let mut root = Map::new();
    for (var, key) in ALIASES {
        if let Some(value) = env.get(*var) {
            set_path(
                &mut root,
                &split(key),
                Value::String(value.trim().to_string()),
            );
            collector
                .origins
                .set
                .push((key.to_string(), var.to_string()));
        }
    }
    for (var, key) in SECONDS_ALIASES {
        if let Some(value) = env.get(*var) {
            match value.trim().parse::<u64>() {
                Ok(secs) => {
                    set_path(&mut root, &split(key), Value::String(format!("{secs}s")));
                    collector
                        .origins
                        .set
                        .push((key.to_string(), var.to_string()));
                }
                Err(_) => collector.push_env(
                    var,
                    *key,
                    format!("{value:?} is not a whole number of seconds"),
                ),
            }
        }
    }
    Value::Object(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_matched_in_their_variable_spelling() {
        assert_eq!(env_spelling("mock-b"), "mock_b");
        assert_eq!(env_spelling("OpenAI.eu-1"), "openai_eu_1");
        let yaml: Value = serde_json::json!({"channels": {"mock-b": {"weight": 1}, "a": {}}});
        let env = HashMap::from([
            (
                "SWITCHYARD_CHANNELS__MOCK_B__WEIGHT".to_string(),
                "7".to_string(),
            ),
            (
                "SWITCHYARD_CHANNELS__NEW__WEIGHT".to_string(),
                "3".to_string(),
            ),
        ]);
        let mut collector = Collector::new(std::path::Path::new("t.yaml"));
        let overrides = env_overrides(&env, &yaml, &["channels"], &mut collector);
        assert_eq!(overrides["channels"]["mock-b"]["weight"], "7");
        assert_eq!(overrides["channels"]["new"]["weight"], "3");
        assert!(overrides["channels"].get("mock_b").is_none(), "{overrides}");
        assert_eq!(
            collector.origins.var_for("channels.mock-b.weight"),
            Some("SWITCHYARD_CHANNELS__MOCK_B__WEIGHT")
        );
        assert_eq!(collector.origins.var_for("channels.mock-b.base_url"), None);
        // every error inside an entry a variable created names that variable
        assert_eq!(
            collector.origins.var_for("channels.new.base_url"),
            Some("SWITCHYARD_CHANNELS__NEW__WEIGHT")
        );
    }

    #[test]
    fn an_ambiguous_name_is_an_error_naming_the_variable() {
        let yaml: Value = serde_json::json!({"channels": {"mock-b": {}, "mock.b": {}}});
        let env = HashMap::from([(
            "SWITCHYARD_CHANNELS__MOCK_B__WEIGHT".to_string(),
            "7".to_string(),
        )]);
        let mut collector = Collector::new(std::path::Path::new("t.yaml"));
        env_overrides(&env, &yaml, &["channels"], &mut collector);
        let error = collector.finish().to_string();
        assert!(
            error.starts_with(
                "environment variable SWITCHYARD_CHANNELS__MOCK_B__WEIGHT: channels: "
            ),
            "{error}"
        );
        assert!(
            error.contains("\"mock-b\"") && error.contains("\"mock.b\""),
            "{error}"
        );
    }
}
