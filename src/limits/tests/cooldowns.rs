//! Paused-time tests of upstream key cool-downs (R15.3): one key only, bounded by the
//! maximum, never shortened, bounded in memory, and fed from real 429 headers.
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use tokio::time::{advance, Instant};

use crate::limits::upstream::rate_limited;
use crate::limits::KeyCooldowns;

const SEC: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(300);

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_cools_only_that_key_for_that_long() {
    let cd = KeyCooldowns::default();
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", HeaderValue::from_static("2"));
    let hint = rate_limited(&headers, SystemTime::now()).unwrap();
    let now = Instant::now();
    assert_eq!(
        cd.cool("oa", "fp-a", hint.wait, MAX, now),
        Some(now + 2 * SEC)
    );
    assert_eq!(cd.cooling_until("oa", "fp-a", now), Some(now + 2 * SEC));
    // The channel's other key, the same fingerprint on another channel: not cooling.
    assert_eq!(cd.cooling_until("oa", "fp-b", now), None);
    assert_eq!(cd.cooling_until("ob", "fp-a", now), None);
    advance(2 * SEC - Duration::from_millis(1)).await;
    assert!(cd.cooling_until("oa", "fp-a", Instant::now()).is_some());
    advance(Duration::from_millis(1)).await;
    assert_eq!(cd.cooling_until("oa", "fp-a", Instant::now()), None);
}

#[tokio::test(start_paused = true)]
async fn the_configured_maximum_bounds_every_hint() {
    let cd = KeyCooldowns::default();
    let now = Instant::now();
    let mut headers = HeaderMap::new();
    headers.insert(
        "retry-after",
        HeaderValue::from_static("99999999999999999999"),
    );
    let hint = rate_limited(&headers, SystemTime::now()).unwrap();
    assert_eq!(cd.cool("oa", "k", hint.wait, MAX, now), Some(now + MAX));
    assert_eq!(
        cd.cool("oa", "k2", Duration::MAX, MAX, now),
        Some(now + MAX)
    );
    assert_eq!(cd.cool("oa", "k3", 10 * SEC, Duration::ZERO, now), None);
    assert_eq!(cd.cool("oa", "k4", Duration::ZERO, MAX, now), None);
    assert_eq!(cd.cooling_until("oa", "k4", now), None);
}

#[tokio::test(start_paused = true)]
async fn a_shorter_hint_never_shortens_a_cooldown() {
    let cd = KeyCooldowns::default();
    let now = Instant::now();
    cd.cool("oa", "k", 60 * SEC, MAX, now);
    assert_eq!(cd.cool("oa", "k", SEC, MAX, now), Some(now + 60 * SEC));
    assert_eq!(cd.cool("oa", "k", 90 * SEC, MAX, now), Some(now + 90 * SEC));
    cd.clear("oa", "k");
    assert_eq!(cd.cooling_until("oa", "k", now), None);
}

#[tokio::test(start_paused = true)]
async fn cooldowns_are_bounded_and_swept() {
    let cd = KeyCooldowns::with_capacity(32);
    let now = Instant::now();
    for i in 0..1000 {
        cd.cool(
            "ch",
            &format!("k{i}"),
            SEC + Duration::from_millis(i),
            MAX,
            now,
        );
        assert!(cd.len() <= 32, "{} held", cd.len());
    }
    // The newest (longest) survive eviction of the soonest-ending.
    assert!(cd.cooling_until("ch", "k999", now).is_some());
    advance(3 * SEC).await;
    let held = cd.len();
    assert!(held > 0);
    assert_eq!(cd.sweep(Instant::now()), held);
    assert!(cd.is_empty());
}
