//! Reading the file: `${VAR}` interpolation, YAML (serde-saphyr, with the line of every key),
//! seed env aliases and `SWITCHYARD_` env overrides, merged by figment into one JSON tree.
//!
//! Precedence, lowest first: built-in defaults (applied later, in validation) < YAML file <
//! seed aliases (`RETRY_MAX_RETRIES`, …) < `SWITCHYARD_*` variables.

use std::collections::HashMap;

use figment::providers::Serialized;
use figment::Figment;
use serde_json::Value;

use crate::config::error::Collector;
use crate::config::load::env::{alias_overrides, env_overrides};

/// Top-level sections; `SWITCHYARD_*` variables whose first segment is not one of these
/// (e.g. `SWITCHYARD_ADMIN_TOKEN`, read through `${…}`) are not config overrides.
pub(crate) const SECTIONS: &[&str] = &[
    "listen",
    "tls",
    "admin",
    "storage",
    "shared",
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
    "groups",
    "pricing",
    "tasks",
    "telemetry",
];

/// Replace `${NAME}` with the variable's value (`$${` is a literal `${`). Comment lines are
/// left alone. Unset variables and unterminated references are reported with their line;
/// the variables used on each line are noted for later errors about that line.
pub(crate) fn interpolate(
    text: &str,
    env: &HashMap<String, String>,
    collector: &mut Collector,
) -> String {
    let mut out = String::with_capacity(text.len());
    for (idx, line) in text.split_inclusive('\n').enumerate() {
        let lineno = u32::try_from(idx + 1).unwrap_or(u32::MAX);
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
                            collector.push_line(
                                Some(lineno),
                                format!("${{{name}}} is not a variable reference: a name is letters, digits and `_` (write $${{ for a literal ${{)"),
                            );
                        } else if let Some(value) = env.get(name) {
                            out.push_str(value);
                            collector
                                .uses
                                .entry(lineno)
                                .or_default()
                                .push(name.to_string());
                        } else {
                            collector.push_line(
                                Some(lineno),
                                format!("environment variable {name} is not set; set it, or remove ${{{name}}} from the file"),
                            );
                        }
                        rest = &tail[end + 1..];
                    }
                    None => {
                        collector.push_line(
                            Some(lineno),
                            "`${` is not closed by `}` (write $${ for a literal ${)",
                        );
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
    for (i, character) in line.char_indices() {
        match character {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_ws => return i,
            _ => {}
        }
        prev_ws = character.is_whitespace();
    }
    line.len()
}

/// True when the text holds nothing but blank lines and comments.
fn is_blank_yaml(text: &str) -> bool {
    text.lines().all(|line| {
        let trimmed = line.trim();
        trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---"
    })
}

/// Interpolated YAML + aliases + env overrides → one tree. `None` when the YAML itself
/// could not be parsed (the error is recorded). The line of every key is kept in `collector`.
pub(crate) fn merged_tree(
    text: &str,
    env: &HashMap<String, String>,
    collector: &mut Collector,
) -> Option<Value> {
    let text = interpolate(text, env, collector);
    let yaml = if is_blank_yaml(&text) {
        Value::Object(Default::default())
    } else {
        match crate::config::load::yaml::parse(&text) {
            Ok((tree, lines)) => {
                collector.lines = lines;
                tree
            }
            Err(e) => {
                collector.push_line(e.line, e.reason);
                return None;
            }
        }
    };
    if !yaml.is_object() {
        collector.push_line(
            Some(1),
            "the file must be a mapping of sections (`listen:`, `channels:`, …)",
        );
        return None;
    }
    let aliases = alias_overrides(env, collector);
    let overrides = env_overrides(env, &yaml, SECTIONS, collector);
    let fig = Figment::new()
        .merge(Serialized::defaults(yaml))
        .merge(Serialized::defaults(aliases))
        .merge(Serialized::defaults(overrides));
    match fig.extract::<Value>() {
        Ok(merged @ Value::Object(_)) => Some(merged),
        Ok(_) => {
            collector.push("", "the file must be a mapping of sections");
            None
        }
        Err(errors) => {
            for err in errors {
                collector.push(err.path.join("."), format!("{}", err.kind));
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
        let mut collector = Collector::new(std::path::Path::new("t.yaml"));
        let env = HashMap::from([("A".to_string(), "1".to_string())]);
        let out = interpolate(
            "x: ${A} # prod: ${UNSET}\ny: '#${A}'\n# ${UNSET}\n",
            &env,
            &mut collector,
        );
        assert!(collector.errors.is_empty(), "{:?}", collector.errors);
        assert_eq!(out, "x: 1 # prod: ${UNSET}\ny: '#1'\n# ${UNSET}\n");
    }
}
