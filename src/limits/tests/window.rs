//! Tests of the sliding-window counter (R15.1): burst, edges, expiry, give-back, waits.
use crate::limits::window::{Geometry, Window, DAY, MINUTE};

const S: u64 = 1_000;

fn admit(w: &mut Window, cost: u64, limit: u64, now: u64) -> bool {
    if w.wait_ms(cost, limit, now) == Some(0) {
        w.advance(now);
        w.add(cost);
        true
    } else {
        false
    }
}

#[test]
fn a_full_burst_fits_then_nothing_until_the_granule_leaves() {
    let mut window = Window::new(MINUTE);
    let admitted = (0..40).filter(|_| admit(&mut window, 1, 10, 500)).count();
    assert_eq!(admitted, 10);
    // Granule 0 is counted until (0 + 61) s: one granule late, never early.
    assert_eq!(window.wait_ms(1, 10, 500), Some(61 * S - 500));
    assert!(!admit(&mut window, 1, 10, 60 * S + 999));
    assert!(!admit(&mut window, 1, 10, 61 * S - 1));
    assert!(admit(&mut window, 1, 10, 61 * S));
}

#[test]
fn no_double_burst_across_a_minute_boundary() {
    // The fixed-window failure: 10 just before the minute and 10 just after.
    let mut window = Window::new(MINUTE);
    assert_eq!(
        (0..10)
            .filter(|_| admit(&mut window, 1, 10, 59_900))
            .count(),
        10
    );
    assert_eq!(
        (0..10)
            .filter(|_| admit(&mut window, 1, 10, 60_100))
            .count(),
        0
    );
    assert_eq!(
        (0..10)
            .filter(|_| admit(&mut window, 1, 10, 119_999))
            .count(),
        0
    );
    assert_eq!(
        (0..20)
            .filter(|_| admit(&mut window, 1, 10, 120_000))
            .count(),
        10
    );
}

#[test]
fn the_wait_is_until_enough_old_granules_leave() {
    let mut window = Window::new(MINUTE);
    for t in [0, 10 * S, 20 * S] {
        window.advance(t);
        window.add(300);
    }
    let now = 30 * S;
    assert_eq!(window.used(now), 900);
    assert_eq!(window.wait_ms(100, 1000, now), Some(0));
    // 400 more needs the first 300 gone: granule 0 leaves at 61 s.
    assert_eq!(window.wait_ms(400, 1000, now), Some(31 * S));
    // 700 needs two granules gone: granule 10 leaves at 71 s.
    assert_eq!(window.wait_ms(700, 1000, now), Some(41 * S));
    assert_eq!(window.wait_ms(1000, 1000, now), Some(51 * S));
    assert_eq!(window.wait_ms(1001, 1000, now), None);
    assert_eq!(window.reset_ms(now), 51 * S);
}

#[test]
fn used_is_read_only_and_matches_advance() {
    let mut window = Window::new(MINUTE);
    for t in 0..120 {
        window.advance(t * S);
        window.add(t + 1);
    }
    for probe in [
        119 * S,
        125 * S,
        150 * S,
        179 * S,
        180 * S,
        181 * S,
        10_000 * S,
    ] {
        let read = window.used(probe);
        let mut copy = window.clone();
        copy.advance(probe);
        assert_eq!(read, copy.used(probe), "at {probe}");
    }
    assert_eq!(window.used(10_000 * S), 0);
    assert_eq!(window.reset_ms(10_000 * S), 0);
}

#[test]
fn give_back_returns_to_its_granule_only_while_it_counts() {
    let mut window = Window::new(MINUTE);
    let granules = window.add(500);
    window.advance(30 * S);
    window.give_back(granules, 200);
    assert_eq!(window.used(30 * S), 300);
    // Never more than the granule holds.
    window.give_back(granules, 10_000);
    assert_eq!(window.used(30 * S), 0);

    let granules = window.add(400);
    window.advance(100 * S);
    window.add(50);
    window.give_back(granules, 400); // granule 30 left at 91 s: nothing to give back
    assert_eq!(window.used(100 * S), 50);
}

#[test]
fn counters_saturate_instead_of_wrapping() {
    let mut window = Window::new(MINUTE);
    window.add(u64::MAX);
    window.add(u64::MAX);
    assert_eq!(window.used(0), u64::from(u32::MAX));
    assert_eq!(window.wait_ms(1, u64::MAX, 0), Some(0));
}

#[test]
fn a_day_window_counts_for_a_day_plus_at_most_one_granule() {
    let mut window = Window::new(DAY);
    let day = DAY.span_ms();
    assert_eq!(day, 86_400 * S);
    assert!(admit(&mut window, 1, 2, 0));
    assert!(admit(&mut window, 1, 2, 12 * 3600 * S));
    assert!(!admit(&mut window, 1, 2, 23 * 3600 * S));
    assert_eq!(
        window.wait_ms(1, 2, 23 * 3600 * S),
        Some(day + 300 * S - 23 * 3600 * S)
    );
    assert!(!admit(&mut window, 1, 2, day));
    assert!(admit(&mut window, 1, 2, day + 300 * S));
}

#[test]
fn degenerate_geometry_is_clamped() {
    let mut window = Window::new(Geometry {
        granule_ms: 0,
        slots: 0,
    });
    assert_eq!(window.geometry().span_ms(), 1);
    assert!(admit(&mut window, 1, 1, 0));
    assert!(!admit(&mut window, 1, 1, 1));
    assert!(admit(&mut window, 1, 1, 2));
}
