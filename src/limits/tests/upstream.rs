//! Tests of upstream reset learning (R15.3): every header format the providers send, which
//! one wins, and hostile values (never a panic; ignored, or saturated for the caller's bound).
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;

use crate::limits::duration::parse_go;
use crate::limits::upstream::{exhausted, rate_limited, retry_after, rfc3339_wait, Hint, Source};

/// 2023-11-14T22:13:20Z.
fn wall() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (n, v) in pairs {
        headers.append(*n, HeaderValue::from_str(v).unwrap());
    }
    headers
}

fn wait(pairs: &[(&'static str, &str)]) -> Option<Duration> {
    rate_limited(&headers(pairs), wall()).map(|h| h.wait)
}

const MS: fn(u64) -> Duration = Duration::from_millis;

#[test]
fn retry_after_ms_wins_then_retry_after_then_provider_resets() {
    let all = [
        ("retry-after-ms", "1500"),
        ("retry-after", "7"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "20s"),
    ];
    let hint = rate_limited(&headers(&all), wall()).unwrap();
    assert_eq!(
        hint,
        Hint {
            wait: MS(1500),
            source: Source::RetryAfterMs
        }
    );
    let hint = rate_limited(&headers(&all[1..]), wall()).unwrap();
    assert_eq!(
        hint,
        Hint {
            wait: MS(7000),
            source: Source::RetryAfter
        }
    );
    let hint = rate_limited(&headers(&all[2..]), wall()).unwrap();
    assert_eq!(
        hint,
        Hint {
            wait: MS(20_000),
            source: Source::OpenAiReset
        }
    );
    assert_eq!(rate_limited(&HeaderMap::new(), wall()), None);
}

#[test]
fn retry_after_takes_seconds_fractions_and_http_dates() {
    assert_eq!(wait(&[("retry-after", "2")]), Some(MS(2000)));
    assert_eq!(wait(&[("retry-after", " 2 ")]), Some(MS(2000)));
    assert_eq!(wait(&[("retry-after", "0.25")]), Some(MS(250)));
    assert_eq!(
        wait(&[("retry-after-ms", "20.5")]),
        Some(Duration::from_micros(20_500))
    );
    // IMF-fixdate, and the two obsolete forms RFC 9110 still requires readers to accept.
    for date in [
        "Tue, 14 Nov 2023 22:13:50 GMT",
        "Tuesday, 14-Nov-23 22:13:50 GMT",
        "Tue Nov 14 22:13:50 2023",
    ] {
        assert_eq!(wait(&[("retry-after", date)]), Some(MS(30_000)), "{date}");
    }
    // A date in the past, or zero: nothing to wait for.
    assert_eq!(
        wait(&[("retry-after", "Tue, 14 Nov 2023 22:00:00 GMT")]),
        None
    );
    assert_eq!(wait(&[("retry-after", "0")]), None);
    assert_eq!(wait(&[("retry-after-ms", "0")]), None);
}

#[test]
fn openai_resets_of_exhausted_limits_decide() {
    let header_pairs = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "1s"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ];
    // Both exhausted: the key has room only when both are back.
    assert_eq!(wait(&header_pairs), Some(MS(360_000)));
    // Only requests exhausted: the tokens reset does not matter.
    let header_pairs = [
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "1h2m3.5s"),
        ("x-ratelimit-remaining-tokens", "15000"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ];
    assert_eq!(wait(&header_pairs), Some(MS(3_723_500)));
    assert_eq!(
        exhausted(&headers(&header_pairs), wall()).unwrap().wait,
        MS(3_723_500)
    );
    // Nothing marked exhausted: the earliest reset is the cheapest guess.
    let header_pairs = [
        ("x-ratelimit-reset-requests", "20ms"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ];
    assert_eq!(wait(&header_pairs), Some(MS(20)));
    assert_eq!(exhausted(&headers(&header_pairs), wall()), None);
}

#[test]
fn anthropic_resets_are_rfc3339_times() {
    let header_pairs = [
        ("anthropic-ratelimit-requests-remaining", "12"),
        ("anthropic-ratelimit-requests-reset", "2023-11-14T22:13:30Z"),
        ("anthropic-ratelimit-input-tokens-remaining", "0"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2023-11-14T22:14:20.5Z",
        ),
        ("anthropic-ratelimit-output-tokens-remaining", "0"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2023-11-14T23:13:45+01:00",
        ),
    ];
    let hint = rate_limited(&headers(&header_pairs), wall()).unwrap();
    assert_eq!(
        hint,
        Hint {
            wait: MS(60_500),
            source: Source::AnthropicReset
        }
    );
    // 23:13:45+01:00 is 22:13:45Z.
    assert_eq!(
        rfc3339_wait("2023-11-14T23:13:45+01:00", wall()),
        Some(MS(25_000))
    );
    assert_eq!(
        rfc3339_wait("2023-11-14T21:13:45-01:00", wall()),
        Some(MS(25_000))
    );
    assert_eq!(
        rfc3339_wait("2023-11-14T22:13:45+00:00", wall()),
        Some(MS(25_000))
    );
    // Past: zero.
    assert_eq!(
        rfc3339_wait("2023-11-14T22:00:00Z", wall()),
        Some(Duration::ZERO)
    );
}

#[test]
fn hostile_values_are_ignored_or_saturated() {
    malformed_retry_after_is_ignored();
    huge_values_saturate();
    malformed_go_durations_are_ignored();
    malformed_reset_times_are_ignored();
    long_non_ascii_and_negative_values_are_not_read();
}

/// `Retry-After` and `retry-after-ms` that are not a non-negative number of seconds.
fn malformed_retry_after_is_ignored() {
    for bad in [
        "-5",
        "-0",
        "-0.5",
        "NaN",
        "nan",
        "inf",
        "-inf",
        "1e400",
        "abc",
        "",
        " ",
        "5s",
        "0x10",
        "1,5",
        "Tue, 31 Feb 2023 25:61:61 GMT",
        "2023-11-14T22:13:30Z",
    ] {
        assert_eq!(wait(&[("retry-after", bad)]), None, "retry-after {bad:?}");
        assert_eq!(
            wait(&[("retry-after-ms", bad)]),
            None,
            "retry-after-ms {bad:?}"
        );
    }
}

/// Huge but well-formed: saturates; the caller bounds it.
fn huge_values_saturate() {
    assert_eq!(wait(&[("retry-after", "1e300")]), Some(Duration::MAX));
    assert_eq!(
        wait(&[("retry-after", "99999999999999999999999")]),
        Some(Duration::MAX)
    );
    let huge = parse_go("99999999999999999999h").unwrap();
    assert_eq!(huge, Duration::from_nanos(u64::MAX));
}

/// OpenAI's Go-style reset durations that do not parse.
fn malformed_go_durations_are_ignored() {
    for bad in [
        "-1s",
        "1h-2m",
        "5",
        "s",
        ".s",
        "1x",
        "1.2.3s",
        "1s garbage",
        "∞s",
        "1e3s",
    ] {
        assert_eq!(parse_go(bad), None, "{bad:?}");
        let header_pairs = [
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", bad),
        ];
        assert_eq!(wait(&header_pairs), None, "{bad:?}");
    }
}

/// Anthropic's RFC 3339 reset times that do not parse or are out of range.
fn malformed_reset_times_are_ignored() {
    for bad in [
        "2023-11-14T22:13:30",
        "2023-13-14T22:13:30Z",
        "2023-11-14T22:13:30+25:00",
        "1969-12-31T23:59:59Z",
        "10000-01-01T00:00:00Z",
        "2023-11-14T22:13:30.ǅZ",
        "2023-11-14T22:13:30+0a:00",
        "tomorrow",
    ] {
        assert_eq!(rfc3339_wait(bad, wall()), None, "{bad:?}");
    }
}

/// Absurdly long values, bytes that are not visible ASCII, a garbage remaining count.
fn long_non_ascii_and_negative_values_are_not_read() {
    // Absurdly long values are not read at all.
    let long = "1".repeat(65);
    assert_eq!(wait(&[("retry-after", &long)]), None);
    // Bytes that are not visible ASCII.
    let mut headers_in = HeaderMap::new();
    headers_in.insert(
        "retry-after",
        HeaderValue::from_bytes(b"\xff\xfe5").unwrap(),
    );
    assert_eq!(rate_limited(&headers_in, wall()), None);
    // A garbage remaining does not mark a limit exhausted.
    let headers_in = [
        ("x-ratelimit-remaining-requests", "-1"),
        ("x-ratelimit-reset-requests", "5s"),
    ];
    assert_eq!(exhausted(&headers(&headers_in), wall()), None);
}

#[test]
fn retry_after_parser_handles_edge_forms() {
    assert_eq!(retry_after("+3", wall()), Some(MS(3000)));
    assert_eq!(
        retry_after("Tue, 14 Nov 2023 22:13:20 GMT", wall()),
        Some(Duration::ZERO)
    );
    assert_eq!(
        retry_after("Sun, 06 Nov 1994 08:49:37 GMT", wall()),
        Some(Duration::ZERO)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No header value, however hostile, makes the parsers panic.
    #[test]
    fn parsers_never_panic(v in "\\PC{0,70}", b in proptest::collection::vec(any::<u8>(), 0..70)) {
        let _ = parse_go(&v);
        let _ = rfc3339_wait(&v, wall());
        let _ = retry_after(&v, wall());
        let mut headers = HeaderMap::new();
        for name in [
            "retry-after", "retry-after-ms", "x-ratelimit-reset-tokens",
            "x-ratelimit-remaining-tokens", "anthropic-ratelimit-tokens-reset",
            "anthropic-ratelimit-tokens-remaining",
        ] {
            if let Ok(val) = HeaderValue::from_str(&v) {
                headers.insert(name, val);
            }
        }
        let _ = rate_limited(&headers, wall());
        if let Ok(val) = HeaderValue::from_bytes(&b) {
            headers.insert("anthropic-ratelimit-tokens-reset", val.clone());
            headers.insert("retry-after", val);
        }
        let _ = rate_limited(&headers, wall());
        let _ = exhausted(&headers, wall());
    }

    /// What switchyard sends, OpenAI's parser reads back (rounded up to the millisecond).
    #[test]
    fn go_duration_round_trips(ms in 0u64..400_000_000) {
        let wait = Duration::from_millis(ms);
        prop_assert_eq!(parse_go(&crate::limits::duration::format_go(wait)), Some(wait));
    }
}
