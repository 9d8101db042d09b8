//! The headers of a rate-limited answer (R15.2), as the caller's SDK reads them: OpenAI's
//! `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (reset as a Go duration),
//! Anthropic's `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (reset as an
//! RFC 3339 time), and `retry-after` (whole seconds, rounded up, at least 1) with
//! `retry-after-ms` (both official SDKs prefer it). A request that can never fit gets
//! `x-should-retry: false` instead, which both SDKs obey. Pure: the wall clock is a parameter.

use std::fmt::Write;
use std::time::{Duration, SystemTime};

use http::{HeaderName, HeaderValue};

use super::duration::format_go;
use super::refusal::{ceil_secs, Kind, Numbers, Refusal, Report};

use crate::error::ClientFormat;

type Pair = (HeaderName, HeaderValue);

const OPENAI_REQUESTS: [&str; 3] = [
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
];
const OPENAI_TOKENS: [&str; 3] = [
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
];
const ANTHROPIC_REQUESTS: [&str; 3] = [
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
];
const ANTHROPIC_TOKENS: [&str; 3] = [
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
];

fn pair(name: &'static str, value: String) -> Option<Pair> {
    Some((
        HeaderName::from_static(name),
        HeaderValue::from_str(&value).ok()?,
    ))
}

/// A reset further out than this is shown as this far (no window is longer than a day).
const MAX_RESET: Duration = Duration::from_secs(366 * 86_400);

/// `wall_now + d` (`d` at most a year), rounded up to the whole second, as RFC 3339
/// (`2025-01-01T00:00:07Z`). A clock past year 9999 gives the last second of 9999.
pub fn rfc3339_after(wall_now: SystemTime, duration: Duration) -> String {
    let at = wall_now
        .checked_add(duration.min(MAX_RESET))
        .unwrap_or(wall_now);
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let secs = since.as_secs() + u64::from(since.subsec_nanos() > 0);
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let mut out = String::with_capacity(20);
    // humantime's Display fails (rather than wraps) beyond year 9999.
    if write!(out, "{}", humantime::format_rfc3339_seconds(at)).is_err() {
        return "9999-12-31T23:59:59Z".to_string();
    }
    out
}

fn trio(
    names: [&'static str; 3],
    n: Numbers,
    format: ClientFormat,
    wall_now: SystemTime,
    out: &mut Vec<Pair>,
) {
    let reset = match format {
        ClientFormat::OpenAi => format_go(n.reset),
        ClientFormat::Anthropic => rfc3339_after(wall_now, n.reset),
    };
    out.extend(pair(names[0], n.limit.to_string()));
    out.extend(pair(names[1], n.remaining.to_string()));
    out.extend(pair(names[2], reset));
}

/// The limit/remaining/reset headers for `report`; `prefer` picks which request limit the
/// requests trio shows when both `rpm` and `rpd` are set (the refused one). Usable on
/// admitted answers too.
pub fn report_headers(
    report: &Report,
    prefer: Option<Kind>,
    format: ClientFormat,
    wall_now: SystemTime,
    out: &mut Vec<Pair>,
) {
    let (req, tok) = match format {
        ClientFormat::OpenAi => (OPENAI_REQUESTS, OPENAI_TOKENS),
        ClientFormat::Anthropic => (ANTHROPIC_REQUESTS, ANTHROPIC_TOKENS),
    };
    if let Some(n) = report.requests(prefer) {
        trio(req, n, format, wall_now, out);
    }
    if let Some(n) = report.get(Kind::Tpm) {
        trio(tok, n, format, wall_now, out);
    }
}

/// Every header of a 429 for `refusal` in `format`.
pub fn refusal_headers(refusal: &Refusal, format: ClientFormat, wall_now: SystemTime) -> Vec<Pair> {
    let mut out = Vec::with_capacity(8);
    report_headers(
        &refusal.report,
        Some(refusal.kind),
        format,
        wall_now,
        &mut out,
    );
    // B-retry-after-ceiling: never advertise more than the window (a 60 s window answers 60, not 61 —
    // Claude Code gives up on a Retry-After above 60): by then the window has rolled over.
    let cap = refusal.kind.window().unwrap_or(Duration::MAX);
    match refusal.retry_after.map(|w| w.min(cap)) {
        Some(wait) => {
            out.extend(pair("retry-after", ceil_secs(wait).to_string()));
            let ms = wait.as_millis() + u128::from(wait.as_nanos() % 1_000_000 > 0);
            out.extend(pair("retry-after-ms", ms.max(1).to_string()));
        }
        None => out.extend(pair("x-should-retry", "false".to_string())),
    }
    out
}
