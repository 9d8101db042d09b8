//! Reading the file: `${VAR}` interpolation, YAML through figment (a `Format` over
//! serde-saphyr), seed env aliases and `SWITCHYARD_` env overrides, merged into one JSON tree.
//!
//! Precedence, lowest first: built-in defaults (applied later, in validation) < YAML file <
//! seed aliases (`RETRY_MAX_RETRIES`, …) < `SWITCHYARD_*` variables.

use std::collections::HashMap;

use figment::providers::{Format, Serialized};
use figment::Figment;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::Collector;

/// Top-level sections; `SWITCHYARD_*` variables whose first segment is not one of these
/// (e.g. `SWITCHYARD_ADMIN_TOKEN`, read through `${…}`) are not config overrides.
pub(crate) const SECTIONS: &[&str] = &[
    "listen",
    "tls",
    "admin",
    "storage",
    "debug_headers",
    "limits",
    "timeouts",
    "routing",
    "auto_groups",
    "resilience",
    "auto_disable",
    "images_failover",
    "channels",
    "virtual_models",
    "affinity",
    "clients",
    "pricing",
    "tasks",
];

/// YAML for figment, parsed by serde-saphyr.
pub struct Yaml;

impl Format for Yaml {
    type Error = serde_saphyr::Error;
    const NAME: &'static str = "YAML";

    fn from_str<T: DeserializeOwned>(string: &str) -> Result<T, Self::Error> {
        serde_saphyr::from_str(string)
    }
}

/// Replace `${NAME}` with the variable's value (`$${` is a literal `${`). Comment lines are
/// left alone. Unset variables and unterminated references are reported with their line.
pub(crate) fn interpolate(
    text: &str,
    env: &HashMap<String, String>,
    errs: &mut Collector,
) -> String {
    let mut out = String::with_capacity(text.len());
    for (idx, line) in text.split_inclusive('\n').enumerate() {
        let lineno = idx + 1;
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        // A trailing ` # comment` is kept verbatim: `${VAR}` in comments is documentation.
        let (code, comment) = line.split_at(comment_start(line));
        let mut rest = code;
        while let Some(pos) = rest.find('$') {
            out.push_str(&rest[..pos]);
            let after = &rest[pos..];
            if let Some(tail) = after.strip_prefix("$${") {
                out.push_str("${");
                rest = tail;
            } else if let Some(tail) = after.strip_prefix("${") {
                match tail.find('}') {
                    Some(end) => {
                        let name = &tail[..end];
                        let valid = !name.is_empty()
                            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                            && !name.starts_with(|c: char| c.is_ascii_digit());
                        if !valid {
                            errs.push(
                                "",
                                format!("line {lineno}: invalid variable reference ${{{name}}}"),
                            );
                        } else if let Some(v) = env.get(name) {
                            out.push_str(v);
                        } else {
                            errs.push(
                                "",
                                format!("line {lineno}: environment variable {name} is not set"),
                            );
                        }
                        rest = &tail[end + 1..];
                    }
                    None => {
                        errs.push("", format!("line {lineno}: unterminated ${{ reference"));
                        rest = "";
                    }
                }
            } else {
                out.push('$');
                rest = &after[1..];
            }
        }
        out.push_str(rest);
        out.push_str(comment);
    }
    out
}

/// Byte offset where a YAML comment starts on `line` (a `#` at the start or after
/// whitespace, outside quotes), or the line's length.
fn comment_start(line: &str) -> usize {
    let (mut single, mut double) = (false, false);
    let mut prev_ws = true;
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_ws => return i,
            _ => {}
        }
        prev_ws = c.is_whitespace();
    }
    line.len()
}

fn set_path(root: &mut Map<String, Value>, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = root;
    for p in parents {
        let entry = node
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        match entry {
            Value::Object(m) => node = m,
            _ => return,
        }
    }
    node.insert(last.to_string(), value);
}

/// An env value: a `[a, b]` list is parsed as a YAML flow sequence; anything else stays a
/// string (the lenient deserializer turns it into a number/bool where one is expected).
fn env_value(raw: &str) -> Value {
    let t = raw.trim();
    if t.starts_with('[') && t.ends_with(']') {
        if let Ok(v) = serde_saphyr::from_str::<Value>(t) {
            return v;
        }
    }
    Value::String(raw.to_string())
}

/// `SWITCHYARD_A__B_C=v` → `{a: {b_c: v}}`.
pub(crate) fn env_overrides(env: &HashMap<String, String>) -> Value {
    let mut root = Map::new();
    let mut names: Vec<&String> = env.keys().collect();
    names.sort();
    for name in names {
        let Some(rest) = name.strip_prefix("SWITCHYARD_") else {
            continue;
        };
        let lower = rest.to_ascii_lowercase();
        let path: Vec<&str> = lower.split("__").collect();
        if path.iter().any(|p| p.is_empty()) || !SECTIONS.contains(&path[0]) {
            tracing::debug!(var = %name, "not a config override; ignored");
            continue;
        }
        set_path(&mut root, &path, env_value(&env[name]));
    }
    Value::Object(root)
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

pub(crate) fn alias_overrides(env: &HashMap<String, String>, errs: &mut Collector) -> Value {
    let mut root = Map::new();
    for (var, key) in ALIASES {
        if let Some(v) = env.get(*var) {
            let path: Vec<&str> = key.split('.').collect();
            set_path(&mut root, &path, Value::String(v.trim().to_string()));
        }
    }
    for (var, key) in SECONDS_ALIASES {
        if let Some(v) = env.get(*var) {
            match v.trim().parse::<u64>() {
                Ok(secs) => {
                    let path: Vec<&str> = key.split('.').collect();
                    set_path(&mut root, &path, Value::String(format!("{secs}s")));
                }
                Err(_) => errs.push(
                    *key,
                    format!("env {var}: {v:?} is not a whole number of seconds"),
                ),
            }
        }
    }
    Value::Object(root)
}

/// True when the text holds nothing but blank lines and comments.
fn is_blank_yaml(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "---"
    })
}

/// Interpolated YAML + aliases + env overrides → one tree. `None` when the YAML itself
/// could not be parsed (the error is recorded).
pub(crate) fn merged_tree(
    text: &str,
    env: &HashMap<String, String>,
    errs: &mut Collector,
) -> Option<Value> {
    let text = interpolate(text, env, errs);
    let yaml = if is_blank_yaml(&text) { "{}" } else { &text };
    let aliases = alias_overrides(env, errs);
    let overrides = env_overrides(env);
    let fig = Figment::new()
        .merge(Yaml::string(yaml))
        .merge(Serialized::defaults(aliases))
        .merge(Serialized::defaults(overrides));
    match fig.extract::<Value>() {
        Ok(v @ Value::Object(_)) => Some(v),
        Ok(_) => {
            errs.push("", "the top level must be a mapping");
            None
        }
        Err(e) => {
            for err in e {
                errs.push(err.path.join("."), format!("{}", err.kind));
            }
            None
        }
    }
}

#[cfg(test)]
mod comment_tests {
    use super::*;

    #[test]
    fn variables_in_comments_are_not_interpolated() {
        let mut errs = Collector::new(std::path::Path::new("t.yaml"));
        let env = HashMap::from([("A".to_string(), "1".to_string())]);
        let out = interpolate(
            "x: ${A} # prod: ${UNSET}\ny: '#${A}'\n# ${UNSET}\n",
            &env,
            &mut errs,
        );
        assert!(errs.errors.is_empty(), "{:?}", errs.errors);
        assert_eq!(out, "x: 1 # prod: ${UNSET}\ny: '#1'\n# ${UNSET}\n");
    }
}
