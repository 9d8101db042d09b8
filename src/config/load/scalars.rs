//! Scalar parsing with error collection: durations, status sets, choices, paths.

use std::time::Duration;

use crate::config::error::Collector;
use crate::config::model::status_set::StatusSet;

/// A humantime duration (`250ms`, `30s`, `2h`). A bare `0` is zero; any other bare number
/// is an error, since it could mean seconds or milliseconds: the unit must be written.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let trimmed = s.trim();
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

pub(crate) fn dur(c: &mut Collector, key: &str, v: &Option<String>, default: Duration) -> Duration {
    match v {
        None => default,
        Some(s) => match parse_duration(s) {
            Ok(d) => d,
            Err(e) => {
                c.push(key, e);
                default
            }
        },
    }
}

/// Like [`dur`] but zero is an error.
pub(crate) fn dur_nonzero(
    c: &mut Collector,
    key: &str,
    v: &Option<String>,
    default: Duration,
) -> Duration {
    let duration = dur(c, key, v, default);
    if duration.is_zero() {
        c.push(key, "must be greater than zero");
        return default;
    }
    duration
}

pub(crate) fn status_set(
    c: &mut Collector,
    key: &str,
    v: &Option<String>,
    default: &StatusSet,
) -> StatusSet {
    match v {
        None => default.clone(),
        Some(s) => match StatusSet::parse(s) {
            Ok(set) => set,
            Err(e) => {
                c.push(key, e);
                default.clone()
            }
        },
    }
}

/// A status set from a built-in literal (always valid).
pub(crate) fn builtin_set(s: &str) -> StatusSet {
    StatusSet::parse(s).unwrap_or_default()
}

/// One of a fixed list of words.
pub(crate) fn choice<T: Copy>(
    c: &mut Collector,
    key: &str,
    v: &Option<String>,
    options: &[(&str, T)],
    default: T,
) -> T {
    let Some(s) = v else { return default };
    match options.iter().find(|(name, _)| *name == s.trim()) {
        Some((_, t)) => *t,
        None => {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
            c.push(key, format!("{s:?} is not one of {}", names.join(", ")));
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
pub(crate) fn v1_path(c: &mut Collector, key: &str, p: &str) -> bool {
    if !p.starts_with("/v1/") || p.len() <= 4 || p.contains(char::is_whitespace) {
        c.push(key, format!("path {p:?} must start with /v1/"));
        return false;
    }
    true
}

/// A float within `lo..=hi`.
pub(crate) fn float_in(
    c: &mut Collector,
    key: &str,
    v: Option<f64>,
    lo: f64,
    hi: f64,
    default: f64,
) -> f64 {
    match v {
        None => default,
        Some(x) if x.is_finite() && x >= lo && x <= hi => x,
        Some(x) => {
            let upper = if hi.is_finite() {
                format!("{hi}")
            } else {
                "∞".into()
            };
            c.push(key, format!("{x} is outside {lo}..={upper}"));
            default
        }
    }
}

/// Non-empty, trimmed strings from a list; empty entries are errors.
pub(crate) fn names(
    c: &mut Collector,
    key: &str,
    v: &Option<Vec<String>>,
    default: &[&str],
) -> Vec<String> {
    match v {
        None => default.iter().map(|s| s.to_string()).collect(),
        Some(list) => {
            let mut out = Vec::new();
            for (i, s) in list.iter().enumerate() {
                if s.trim().is_empty() {
                    c.push(format!("{key}[{i}]"), "must not be empty");
                } else if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            out
        }
    }
}
