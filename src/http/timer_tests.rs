//! The header-read timer under paused tokio time (R14.2): timed from the head's first read,
//! out of the timer wheel while no head is under way.
use std::task::Waker;

use super::*;

const TIMEOUT: Duration = Duration::from_millis(300);

fn poll(sleep: &mut Pin<Box<dyn Sleep>>) -> Poll<()> {
    sleep.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

fn in_wheel(sleep: &mut Pin<Box<dyn Sleep>>) -> bool {
    sleep
        .as_mut()
        .downcast_mut_pin::<HeadSleep>()
        .is_some_and(|s| s.armed.is_some())
}

impl HeadClock {
    /// A head under way since `t` (std time does not move under paused tokio time).
    fn began_at(&self, t: Instant) {
        let nanos = t.duration_since(self.epoch).as_nanos() as u64;
        self.stamp.store(nanos + 1, Ordering::Relaxed);
    }
}

#[test]
fn the_clock_follows_the_tracker() {
    let clock = HeadClock::new();
    assert_eq!(clock.head(), Head::None);
    clock.incomplete();
    let Head::Since(first) = clock.head() else {
        panic!("{:?}", clock.head())
    };
    std::thread::sleep(Duration::from_millis(5));
    clock.incomplete();
    assert_eq!(
        clock.head(),
        Head::Since(first),
        "a later read restamped the head"
    );
    clock.between();
    assert_eq!(clock.head(), Head::None);
    clock.incomplete();
    assert!(matches!(clock.head(), Head::Since(t) if t > first));
    clock.untracked();
    clock.between();
    clock.incomplete();
    assert_eq!(clock.head(), Head::Untracked, "untracked is for good");
}

/// Idle (no head under way): polled, it stays out of the wheel and never fires, however long
/// the connection waits — the watchdog times idle connections.
#[tokio::test(start_paused = true)]
async fn no_head_under_way_no_timer() {
    let clock = HeadClock::new();
    let timer = HeadTimer::new(clock.clone(), TIMEOUT);
    let mut sleep = timer.sleep(TIMEOUT);
    for _ in 0..10 {
        assert_eq!(poll(&mut sleep), Poll::Pending);
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert!(!in_wheel(&mut sleep));
}

/// The bug this timer fixes: hyper set its deadline when the connection went idle; a head
/// that began 400 ms later (past the 300 ms timeout) is given its full 300 ms.
#[tokio::test(start_paused = true)]
async fn a_head_after_an_idle_spell_gets_the_whole_timeout() {
    let clock = HeadClock::new();
    let timer = HeadTimer::new(clock.clone(), TIMEOUT);
    let idle_since = Instant::now();
    let mut sleep = timer.sleep_until(idle_since + TIMEOUT);
    assert_eq!(poll(&mut sleep), Poll::Pending);
    tokio::time::advance(Duration::from_millis(400)).await;
    clock.began_at(idle_since + Duration::from_millis(400));
    assert_eq!(
        poll(&mut sleep),
        Poll::Pending,
        "cut at hyper's idle deadline"
    );
    assert!(in_wheel(&mut sleep));
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(poll(&mut sleep), Poll::Pending);
    tokio::time::advance(Duration::from_millis(150)).await;
    assert_eq!(
        poll(&mut sleep),
        Poll::Ready(()),
        "a slow head is still cut"
    );
}

/// hyper re-arms the same sleep for the next head: the new head's start decides.
#[tokio::test(start_paused = true)]
async fn the_next_head_moves_the_armed_sleep() {
    let clock = HeadClock::new();
    let timer = HeadTimer::new(clock.clone(), TIMEOUT);
    let start = Instant::now();
    let mut sleep = timer.sleep_until(start + TIMEOUT);
    clock.began_at(start);
    assert_eq!(poll(&mut sleep), Poll::Pending);
    clock.between();
    timer.reset(&mut sleep, start + Duration::from_millis(200) + TIMEOUT);
    tokio::time::advance(Duration::from_millis(250)).await;
    clock.began_at(start + Duration::from_millis(250));
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(
        poll(&mut sleep),
        Poll::Pending,
        "fired at the first head's end"
    );
    tokio::time::advance(Duration::from_millis(250)).await;
    assert_eq!(poll(&mut sleep), Poll::Ready(()));
}

/// A framing the tracker does not follow: hyper's own deadline, as before.
#[tokio::test(start_paused = true)]
async fn untracked_connections_keep_hypers_deadline() {
    let clock = HeadClock::new();
    let timer = HeadTimer::new(clock.clone(), Duration::from_secs(10));
    let mut sleep = timer.sleep(TIMEOUT);
    clock.untracked();
    assert_eq!(poll(&mut sleep), Poll::Pending);
    tokio::time::advance(Duration::from_millis(400)).await;
    assert_eq!(poll(&mut sleep), Poll::Ready(()));
}

/// A timeout past the clock's range (a config like `999999999999s`) sleeps "forever"
/// instead of panicking, from hyper's side and from the head's.
#[tokio::test(start_paused = true)]
async fn a_timeout_past_the_clock_does_not_panic() {
    let clock = HeadClock::new();
    let timer = HeadTimer::new(clock.clone(), Duration::MAX);
    let mut sleep = timer.sleep(Duration::MAX);
    clock.incomplete();
    assert_eq!(poll(&mut sleep), Poll::Pending);
    clock.untracked();
    tokio::time::advance(Duration::from_secs(86_400)).await;
    assert_eq!(poll(&mut sleep), Poll::Pending);
}
