//! Scalar parsing with error collection: durations, status sets, choices, paths.

use std::time::Duration;

use crate::config::error::Collector;
use crate::config::model::status_set::StatusSet;

/// A humantime duration (`250ms`, `30s`, `2h`). A bare `0` is zero; any other bare number
/// is an error, since it could mean seconds or milliseconds: the unit must be written.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return match trimmed.parse::<u64>() {
            Ok(0) => Ok(Duration::ZERO),
            _ => Err(format!(
                "{trimmed} has no unit; write it with one, such as {trimmed}s or {trimmed}ms"
            )),
        };
    }
    humantime::parse_duration(trimmed).map_err(|_| {
        format!("{trimmed:?} is not a duration; write a number and a unit, such as 250ms, 30s, 10m or 2h")
    })
}

pub(crate) fn dur(
    collector: &mut Collector,
    key: &str,
    value: &Option<String>,
    default: Duration,
) -> Duration {
    match value {
        None => default,
        Some(text) => match parse_duration(text) {
            Ok(duration) => duration,
            Err(e) => {
                collector.push(key, e);
                default
            }
        },
    }
}

/// Like [`dur`] but zero is an error.
pub(crate) fn dur_nonzero(
    collector: &mut Collector,
    key: &str,
    value: &Option<String>,
    default: Duration,
) -> Duration {
    let duration = dur(collector, key, value, default);
    if duration.is_zero() {
        collector.push(key, "must be greater than zero");
        return default;
    }
    duration
}

pub(crate) fn status_set(
    collector: &mut Collector,
    key: &str,
    value: &Option<String>,
    default: &StatusSet,
) -> StatusSet {
    match value {
        None => default.clone(),
        Some(text) => match StatusSet::parse(text) {
            Ok(set) => set,
            Err(e) => {
                collector.push(key, e);
                default.clone()
            }
        },
    }
}

/// A status set from a built-in literal (always valid).
pub(crate) fn builtin_set(literal: &str) -> StatusSet {
    StatusSet::parse(literal).unwrap_or_default()
}

/// One of a fixed list of words.
pub(crate) fn choice<T: Copy>(
    collector: &mut Collector,
    key: &str,
    value: &Option<String>,
    options: &[(&str, T)],
    default: T,
) -> T {
    let Some(word) = value else { return default };
    match options.iter().find(|(name, _)| *name == word.trim()) {
        Some((_, chosen)) => *chosen,
        None => {
            let names: Vec<String> = options
                .iter()
                .map(|(name, _)| format!("{name:?}"))
                .collect();
            collector.push(key, format!("{word:?} is not one of {}", names.join(", ")));
            default
        }
    }
}

/// A `models` entry holding `*` is a pattern (`claude-*`, `gpt-5*`): `*` matches any run of
/// characters, everything else itself.
pub fn is_pattern(model: &str) -> bool {
    model.contains('*')
}

/// The anchored regex of a `*` pattern (`None` only past the regex size limit).
pub fn glob_regex(pattern: &str) -> Option<regex::Regex> {
    let body: Vec<String> = pattern.split('*').map(regex::escape).collect();
    regex::Regex::new(&format!("^{}$", body.join(".*"))).ok()
}

/// A `/v1/...` path.
pub(crate) fn v1_path(collector: &mut Collector, key: &str, path: &str) -> bool {
    if !path.starts_with("/v1/") || path.len() <= 4 || path.contains(char::is_whitespace) {
        collector.push(key, format!("path {path:?} must start with /v1/"));
        return false;
    }
    true
}

/// A float within `lo..=hi`.
pub(crate) fn float_in(
    collector: &mut Collector,
    key: &str,
    value: Option<f64>,
    lo: f64,
    hi: f64,
    default: f64,
) -> f64 {
    match value {
        None => default,
        Some(number) if number.is_finite() && number >= lo && number <= hi => number,
        Some(number) => {
            let upper = if hi.is_finite() {
                format!("{hi}")
            } else {
                "∞".into()
            };
            collector.push(key, format!("{number} is outside {lo}..={upper}"));
            default
        }
    }
}

/// Non-empty, trimmed strings from a list; empty entries are errors.
pub(crate) fn names(
    collector: &mut Collector,
    key: &str,
    value: &Option<Vec<String>>,
    default: &[&str],
) -> Vec<String> {
    match value {
        None => default.iter().map(|name| name.to_string()).collect(),
        Some(list) => {
            let mut out = Vec::new();
            for (i, name) in list.iter().enumerate() {
                if name.trim().is_empty() {
                    collector.push(format!("{key}[{i}]"), "must not be empty");
                } else if !out.contains(name) {
                    out.push(name.clone());
                }
            }
            out
        }
    }
}
