//! Tests of the 429 headers (R15.2) in both SDK formats, and of OpenAI's duration text.
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::error::ClientFormat;
use crate::limits::duration::{format_go, parse_go};
use crate::limits::headers::rfc3339_after;
use crate::limits::{
    refusal_headers, Bounds, ClientLimits, Kind, Limiter, Numbers, Refusal, Report,
};

/// 2023-11-14T22:13:20Z.
fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn get(h: &[(http::HeaderName, http::HeaderValue)], name: &str) -> Option<String> {
    let mut found = h.iter().filter(|(n, _)| n.as_str() == name);
    let value = found
        .next()
        .map(|(_, value)| value.to_str().unwrap().to_string());
    assert!(found.next().is_none(), "{name} twice");
    value
}

fn numbers(limit: u64, remaining: u64, reset_ms: u64) -> Option<Numbers> {
    Some(Numbers {
        limit,
        remaining,
        reset: Duration::from_millis(reset_ms),
    })
}

fn refusal(kind: Kind, retry_ms: Option<u64>) -> Refusal {
    let mut report = Report::default();
    report.set(Kind::Rpm, numbers(60, 0, 61_000));
    report.set(Kind::Rpd, numbers(1000, 900, 86_000_500));
    report.set(Kind::Tpm, numbers(100_000, 2_500, 360_000));
    Refusal {
        kind,
        retry_after: retry_ms.map(Duration::from_millis),
        needed: 1,
        report,
    }
}

/// The wait is capped at the refused kind's window (B-retry-after-ceiling: a 60 s window answers
/// `retry-after: 60`, never 61 — Claude Code gives up above 60).
#[test]
fn openai_headers_carry_both_trios_and_retry_after() {
    let headers = refusal_headers(
        &refusal(Kind::Rpm, Some(60_200)),
        ClientFormat::OpenAi,
        wall(),
    );
    let want = [
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "1m1s"),
        ("x-ratelimit-limit-tokens", "100000"),
        ("x-ratelimit-remaining-tokens", "2500"),
        ("x-ratelimit-reset-tokens", "6m0s"),
        ("retry-after", "60"),
        ("retry-after-ms", "60000"),
    ];
    for (n, v) in want {
        assert_eq!(get(&headers, n).as_deref(), Some(v), "{n}");
    }
    assert_eq!(headers.len(), want.len());
    assert!(headers
        .iter()
        .all(|(n, _)| !n.as_str().starts_with("anthropic-")));
}

#[test]
fn retry_after_never_exceeds_the_window_of_the_refused_kind() {
    for (kind, ms, want) in [
        (Kind::Rpm, 60_001, "60"),
        (Kind::Tpm, 59_001, "60"),
        (Kind::Tpm, 1_500, "2"),
        (Kind::Rpd, 90_000_000, "86400"),
        (Kind::Concurrency, 120_000, "120"),
    ] {
        let headers = refusal_headers(&refusal(kind, Some(ms)), ClientFormat::Anthropic, wall());
        assert_eq!(
            get(&headers, "retry-after").as_deref(),
            Some(want),
            "{kind:?} {ms}"
        );
    }
}

#[test]
fn anthropic_headers_give_resets_as_rfc3339_rounded_up() {
    let headers = refusal_headers(
        &refusal(Kind::Tpm, Some(999)),
        ClientFormat::Anthropic,
        wall(),
    );
    let want = [
        ("anthropic-ratelimit-requests-limit", "60"),
        ("anthropic-ratelimit-requests-remaining", "0"),
        ("anthropic-ratelimit-requests-reset", "2023-11-14T22:14:21Z"),
        ("anthropic-ratelimit-tokens-limit", "100000"),
        ("anthropic-ratelimit-tokens-remaining", "2500"),
        ("anthropic-ratelimit-tokens-reset", "2023-11-14T22:19:20Z"),
        ("retry-after", "1"),
        ("retry-after-ms", "999"),
    ];
    for (n, v) in want {
        assert_eq!(get(&headers, n).as_deref(), Some(v), "{n}");
    }
    assert_eq!(headers.len(), want.len());
    assert!(headers
        .iter()
        .all(|(n, _)| !n.as_str().starts_with("x-ratelimit")));
}

#[test]
fn the_refused_request_limit_is_the_one_shown() {
    let headers = refusal_headers(
        &refusal(Kind::Rpd, Some(5_000)),
        ClientFormat::OpenAi,
        wall(),
    );
    assert_eq!(
        get(&headers, "x-ratelimit-limit-requests").as_deref(),
        Some("1000")
    );
    assert_eq!(
        get(&headers, "x-ratelimit-reset-requests").as_deref(),
        Some("23h53m20.5s")
    );
    // Refused by tokens: the request limit with less left is shown (rpm, 0 left).
    let headers = refusal_headers(
        &refusal(Kind::Tpm, Some(5_000)),
        ClientFormat::OpenAi,
        wall(),
    );
    assert_eq!(
        get(&headers, "x-ratelimit-limit-requests").as_deref(),
        Some("60")
    );
}

#[test]
fn a_request_that_can_never_fit_is_told_not_to_retry() {
    let headers = refusal_headers(&refusal(Kind::Tpm, None), ClientFormat::OpenAi, wall());
    assert_eq!(get(&headers, "x-should-retry").as_deref(), Some("false"));
    assert_eq!(get(&headers, "retry-after"), None);
    assert_eq!(get(&headers, "retry-after-ms"), None);
}

#[test]
fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
    for (ms, secs, ms_text) in [
        (0, "1", "1"),
        (1, "1", "1"),
        (1000, "1", "1000"),
        (1001, "2", "1001"),
        (59_999, "60", "59999"),
    ] {
        let headers = refusal_headers(&refusal(Kind::Rpm, Some(ms)), ClientFormat::OpenAi, wall());
        assert_eq!(
            get(&headers, "retry-after").as_deref(),
            Some(secs),
            "{ms} ms"
        );
        assert_eq!(
            get(&headers, "retry-after-ms").as_deref(),
            Some(ms_text),
            "{ms} ms"
        );
    }
    let mut refused = refusal(Kind::Rpm, None);
    refused.retry_after = Some(Duration::from_nanos(1));
    let headers = refusal_headers(&refused, ClientFormat::Anthropic, wall());
    assert_eq!(get(&headers, "retry-after").as_deref(), Some("1"));
    assert_eq!(get(&headers, "retry-after-ms").as_deref(), Some("1"));
}

#[tokio::test(start_paused = true)]
async fn headers_of_a_real_refusal_show_only_configured_limits() {
    let limiter = Limiter::local(Bounds::default());
    let lim = ClientLimits {
        concurrency: 1,
        ..ClientLimits::default()
    };
    let _held = limiter
        .admit_client_now("c", &lim, 0, Instant::now())
        .unwrap();
    let refusal = limiter
        .admit_client_now("c", &lim, 0, Instant::now())
        .unwrap_err();
    let headers = refusal_headers(&refusal, ClientFormat::Anthropic, wall());
    let names: Vec<_> = headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["retry-after", "retry-after-ms"]);
    assert_eq!(get(&headers, "retry-after").as_deref(), Some("1"));
}

#[test]
fn go_durations_format_like_openai() {
    let cases = [
        (0, "0s"),
        (1, "1ms"),
        (20, "20ms"),
        (999, "999ms"),
        (1000, "1s"),
        (1500, "1.5s"),
        (8_640, "8.64s"),
        (60_000, "1m0s"),
        (360_000, "6m0s"),
        (179_560, "2m59.56s"),
        (3_600_000, "1h0m0s"),
        (3_723_500, "1h2m3.5s"),
    ];
    for (ms, text) in cases {
        assert_eq!(format_go(Duration::from_millis(ms)), text);
        assert_eq!(parse_go(text), Some(Duration::from_millis(ms)), "{text}");
    }
    // Rounded up to the millisecond, never down.
    assert_eq!(format_go(Duration::from_nanos(1)), "1ms");
    assert_eq!(format_go(Duration::from_micros(999_001)), "1s");
    assert_eq!(format_go(Duration::from_micros(1_000_001)), "1.001s");
}

#[test]
fn rfc3339_reset_rounds_up_and_survives_overflow() {
    assert_eq!(
        rfc3339_after(wall(), Duration::ZERO),
        "2023-11-14T22:13:20Z"
    );
    assert_eq!(
        rfc3339_after(wall(), Duration::from_millis(1)),
        "2023-11-14T22:13:21Z"
    );
    assert_eq!(rfc3339_after(wall(), Duration::MAX), "2024-11-14T22:13:20Z");
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799);
    assert_eq!(
        rfc3339_after(far, Duration::from_secs(10)),
        "9999-12-31T23:59:59Z"
    );
}
