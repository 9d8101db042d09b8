//! Learning from upstreams (R15.3): how long an upstream's answer says its key is out of
//! budget, from `retry-after-ms`, `Retry-After` (seconds or HTTP-date), OpenAI's
//! `x-ratelimit-reset-requests|tokens` (Go durations) and Anthropic's
//! `anthropic-ratelimit-*-reset` (RFC 3339 times). Wall-clock values are turned into waits
//! here, against a `SystemTime` the caller passes, so the rest runs on monotonic time.
//!
//! Hostile values (negative, NaN, garbage, non-ASCII, absurdly long, dates in the past) are
//! ignored; huge ones saturate and are bounded by the caller's maximum
//! ([`KeyCooldowns::cool`](super::KeyCooldowns::cool)).

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use super::duration::parse_go;

/// Header values longer than this are not a number or a date; ignore them unread.
const MAX_LEN: usize = 64;

/// OpenAI's (remaining, reset) pairs; reset is a Go duration.
const OPENAI: [(&str, &str); 2] = [
    (
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
    ),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
];

/// Anthropic's (remaining, reset) pairs; reset is an RFC 3339 time.
const ANTHROPIC: [(&str, &str); 4] = [
    (
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    ),
    (
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
    ),
    (
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
    ),
    (
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
    ),
];

/// Which header a wait came from (for logs and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    RetryAfterMs,
    RetryAfter,
    OpenAiReset,
    AnthropicReset,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::RetryAfterMs => "retry-after-ms",
            Source::RetryAfter => "retry-after",
            Source::OpenAiReset => "x-ratelimit-reset",
            Source::AnthropicReset => "anthropic-ratelimit-reset",
        }
    }
}

/// A wait an upstream asked for (not yet bounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hint {
    pub wait: Duration,
    pub source: Source,
}

fn value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let text = headers.get(name)?.to_str().ok()?.trim();
    (!text.is_empty() && text.len() <= MAX_LEN).then_some(text)
}

/// A non-negative, finite number of `unit`s; larger than `Duration` can hold saturates.
fn number(value: &str, unit: f64) -> Option<Duration> {
    let amount: f64 = value.parse().ok()?;
    if !amount.is_finite() || amount < 0.0 || value.starts_with('-') {
        return None;
    }
    Some(Duration::try_from_secs_f64(amount * unit).unwrap_or(Duration::MAX))
}

/// `Retry-After` per RFC 9110: delta-seconds (fractions tolerated) or an HTTP-date.
pub fn retry_after(value: &str, wall_now: SystemTime) -> Option<Duration> {
    if let Some(d) = number(value, 1.0) {
        return Some(d);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(wall_now).unwrap_or(Duration::ZERO))
}

/// An RFC 3339 time as a wait from `wall_now` (zero when past). Accepts `Z` or a numeric
/// offset.
pub fn rfc3339_wait(value: &str, wall_now: SystemTime) -> Option<Duration> {
    if !value.is_ascii() || value.len() < 20 {
        return None;
    }
    let at = match value.as_bytes()[value.len() - 6] {
        sign @ (b'+' | b'-') if value.as_bytes()[value.len() - 3] == b':' => {
            let (base, off) = value.split_at(value.len() - 6);
            let hh: u64 = off[1..3].parse().ok()?;
            let mm: u64 = off[4..6].parse().ok()?;
            if hh > 23 || mm > 59 {
                return None;
            }
            let off = Duration::from_secs(hh * 3600 + mm * 60);
            let utc = humantime::parse_rfc3339_weak(base).ok()?;
            // local = UTC + offset, so UTC = local − offset.
            if sign == b'+' {
                utc.checked_sub(off)?
            } else {
                utc.checked_add(off)?
            }
        }
        _ => humantime::parse_rfc3339(value).ok()?,
    };
    Some(at.duration_since(wall_now).unwrap_or(Duration::ZERO))
}

/// (exhausted, reset) for each provider limit the headers describe.
fn resets(headers: &HeaderMap, wall_now: SystemTime) -> impl Iterator<Item = (bool, Hint)> + '_ {
    let openai = OPENAI.iter().map(|p| (p, Source::OpenAiReset));
    let anthropic = ANTHROPIC.iter().map(|p| (p, Source::AnthropicReset));
    openai
        .chain(anthropic)
        .filter_map(move |((rem, reset), source)| {
            let header = value(headers, reset)?;
            let wait = match source {
                Source::OpenAiReset => parse_go(header)?,
                _ => rfc3339_wait(header, wall_now)?,
            };
            let exhausted = value(headers, rem).and_then(|r| r.parse::<u64>().ok()) == Some(0);
            Some((exhausted, Hint { wait, source }))
        })
}

/// The wait a rate-limited answer (429) asks for: `retry-after-ms`, else `Retry-After`, else
/// the latest reset among the limits marked exhausted (`remaining: 0`), else the earliest
/// reset given. `None` when the headers name no positive wait.
pub fn rate_limited(headers: &HeaderMap, wall_now: SystemTime) -> Option<Hint> {
    let explicit = value(headers, "retry-after-ms")
        .and_then(|v| number(v, 0.001))
        .map(|wait| Hint {
            wait,
            source: Source::RetryAfterMs,
        })
        .or_else(|| {
            let header = value(headers, "retry-after")?;
            let wait = retry_after(header, wall_now)?;
            Some(Hint {
                wait,
                source: Source::RetryAfter,
            })
        });
    if let Some(hint) = explicit {
        return (hint.wait > Duration::ZERO).then_some(hint);
    }
    exhausted(headers, wall_now).or_else(|| {
        resets(headers, wall_now)
            .map(|(_, hint)| hint)
            .filter(|hint| hint.wait > Duration::ZERO)
            .min_by_key(|hint| hint.wait)
    })
}

/// From any answer (a 2xx too): the latest reset among the limits the upstream says are
/// exhausted (`remaining: 0`), so the key is held back before it earns a 429.
pub fn exhausted(headers: &HeaderMap, wall_now: SystemTime) -> Option<Hint> {
    resets(headers, wall_now)
        .filter(|(ex, hint)| *ex && hint.wait > Duration::ZERO)
        .map(|(_, hint)| hint)
        .max_by_key(|hint| hint.wait)
}
