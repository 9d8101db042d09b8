//! OpenAI's rate-limit durations (`1s`, `6m0s`, `20ms`, `1h2m3.5s` — Go's `time.Duration`
//! text): a parser that takes hostile input without panicking, and the formatter for the
//! `x-ratelimit-reset-*` headers switchyard sends.

use std::time::Duration;

/// Longer input is not a duration anyone sends; refuse it before looking.
const MAX_LEN: usize = 64;

/// Units, longest spelling first so `ms` is not read as `m`.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parse a Go-style duration. `None` for garbage, a sign of `-`, or a missing unit; a value
/// beyond `u64` nanoseconds saturates (the caller bounds it).
pub fn parse_go(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_LEN {
        return None;
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (nanos, tail) = segment(rest)?;
        total = total.saturating_add(nanos);
        rest = tail;
    }
    Some(Duration::from_nanos(
        u64::try_from(total).unwrap_or(u64::MAX),
    ))
}

/// One `<number><unit>` at the start of `s`: its nanoseconds and what follows.
fn segment(s: &str) -> Option<(u128, &str)> {
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let (int, after) = s.split_at(int_len);
    let (frac, after) = match after.strip_prefix('.') {
        Some(a) => {
            let digits = a.bytes().take_while(u8::is_ascii_digit).count();
            a.split_at(digits)
        }
        None => ("", after),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let (unit, after) = UNITS
        .iter()
        .find_map(|(u, n)| after.strip_prefix(u).map(|a| (*n, a)))?;
    let whole = int.bytes().fold(0u128, |acc, d| {
        acc.saturating_mul(10).saturating_add(u128::from(d - b'0'))
    });
    let mut nanos = whole.saturating_mul(unit);
    // At most 18 fraction digits matter (the unit is ≤ 3.6e12 ns).
    let frac = &frac[..frac.len().min(18)];
    if !frac.is_empty() {
        let digits = frac
            .bytes()
            .fold(0u128, |acc, d| acc * 10 + u128::from(d - b'0'));
        nanos = nanos.saturating_add(digits * unit / 10u128.pow(frac.len() as u32));
    }
    Some((nanos, after))
}

/// Format for `x-ratelimit-reset-*` the way OpenAI does (Go's notation), rounded UP to the
/// millisecond so a client never comes back early: `0s`, `20ms`, `1s`, `6m0s`, `1h2m3.5s`.
pub fn format_go(duration: Duration) -> String {
    let ms = duration.as_millis() + u128::from(!duration.as_nanos().is_multiple_of(1_000_000));
    if ms == 0 {
        return "0s".to_string();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (hours, rem) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, rem) = (rem / 60_000, rem % 60_000);
    let (seconds, milli) = (rem / 1000, rem % 1000);
    let secs = if milli == 0 {
        format!("{seconds}s")
    } else {
        let frac = format!("{milli:03}");
        format!("{seconds}.{}s", frac.trim_end_matches('0'))
    };
    match (hours, minutes) {
        (0, 0) => secs,
        (0, minutes) => format!("{minutes}m{secs}"),
        (hours, minutes) => format!("{hours}h{minutes}m{secs}"),
    }
}
