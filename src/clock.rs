//! The clock, read in one place: Unix time in milliseconds (`now_ms`, for request-log and
//! ledger rows, persisted state and request ids) and the monotonic instant (`instant`, for
//! durations, deadlines and windows); and the poll clock (`PollClock`), which reads each of
//! them at most once per poll of a request instead of at every reading (~25 a request, each
//! a `clock_gettime` of ~20 ns).
//!
//! Inside a poll of a future wrapped in `PollClock`, the first `instant()` (or `now_ms()`)
//! reads the clock and every later one in the same poll returns that reading: the request's
//! bookkeeping of one poll (plan, limits, windows, billing, the record) all happen "at" one
//! moment. Time moves between polls, so a duration across an `.await` (an attempt's latency,
//! the request's) is measured as before; one inside a single poll reads zero. Outside such a
//! poll (background tasks, the store writer, tests) each call reads the clock.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

/// What one thread's poll clock holds: whether a `PollClock` poll is running, and the
/// readings it made so far.
#[derive(Clone, Copy)]
struct Readings {
    on: bool,
    instant: Option<Instant>,
    ms: Option<i64>,
}

impl Readings {
    const OFF: Readings = Readings {
        on: false,
        instant: None,
        ms: None,
    };
    const ON: Readings = Readings {
        on: true,
        instant: None,
        ms: None,
    };
}

thread_local! {
    static POLL: Cell<Readings> = const { Cell::new(Readings::OFF) };
}

/// Now, monotonic (`tokio::time::Instant`: the paused clock in tests); inside a `PollClock`
/// poll, the poll's one reading.
pub fn instant() -> Instant {
    POLL.with(|p| {
        let r = p.get();
        if !r.on {
            return Instant::now();
        }
        match r.instant {
            Some(now) => now,
            None => {
                let now = Instant::now();
                p.set(Readings {
                    instant: Some(now),
                    ..r
                });
                now
            }
        }
    })
}

/// Milliseconds since the Unix epoch (0 for a clock set before it); inside a `PollClock`
/// poll, the poll's one reading.
pub fn now_ms() -> i64 {
    POLL.with(|p| {
        let r = p.get();
        if !r.on {
            return read_ms();
        }
        match r.ms {
            Some(ms) => ms,
            None => {
                let ms = read_ms();
                p.set(Readings { ms: Some(ms), ..r });
                ms
            }
        }
    })
}

/// Now, monotonic, read from the clock even inside a `PollClock` poll, where it becomes the
/// poll's reading from here on: for the instants a latency is measured from (an attempt's
/// start, an upstream send), which must not be the poll's earlier reading.
pub fn fresh() -> Instant {
    let now = Instant::now();
    POLL.with(|p| {
        let r = p.get();
        if r.on {
            p.set(Readings {
                instant: Some(now),
                ..r
            });
        }
    });
    now
}

/// The time since `t` (zero if `t` is later), by `instant()`.
pub fn elapsed(t: Instant) -> std::time::Duration {
    instant().saturating_duration_since(t)
}

/// The time since a `std::time::Instant`, by `instant()`.
pub fn elapsed_std(t: std::time::Instant) -> std::time::Duration {
    instant().into_std().saturating_duration_since(t)
}

fn read_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A request's future, polled under the poll clock (see the module doc).
pub struct PollClock<F>(pub F);

impl<F: Future + Unpin> Future for PollClock<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = Restore(POLL.with(|p| p.replace(Readings::ON)));
        Pin::new(&mut self.0).poll(cx)
    }
}

/// Puts back the poll clock a `PollClock` poll found (off, or an enclosing poll's), also
/// when the inner poll panics: a thread must never keep a stale reading.
struct Restore(Readings);

impl Drop for Restore {
    fn drop(&mut self) {
        POLL.with(|p| p.set(self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A future that reads the clock, sleeps between two readings without yielding, and
    /// then yields once before reading again.
    struct Reads {
        polls: u32,
        seen: Vec<(Instant, i64)>,
    }

    impl Future for Reads {
        type Output = Vec<(Instant, i64)>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            self.seen.push((instant(), now_ms()));
            std::thread::sleep(Duration::from_millis(3));
            self.seen.push((instant(), now_ms()));
            self.polls += 1;
            if self.polls == 2 {
                return Poll::Ready(std::mem::take(&mut self.seen));
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[tokio::test]
    async fn one_reading_per_poll_and_time_moves_between_polls() {
        let seen = PollClock(Reads {
            polls: 0,
            seen: Vec::new(),
        })
        .await;
        assert_eq!(seen.len(), 4);
        // Within a poll: one reading, though 3 ms passed.
        assert_eq!(seen[0], seen[1]);
        assert_eq!(seen[2], seen[3]);
        // Between polls: a new reading.
        assert!(
            seen[2].0 >= seen[1].0 + Duration::from_millis(3),
            "{seen:?}"
        );
        assert!(seen[2].1 >= seen[1].1 + 3, "{seen:?}");
        assert_reads_the_clock();
    }

    /// Outside a poll clock's poll every call reads the clock.
    fn assert_reads_the_clock() {
        let a = instant();
        std::thread::sleep(Duration::from_millis(2));
        assert!(instant() >= a + Duration::from_millis(2));
    }

    #[test]
    fn a_panicking_poll_leaves_the_clock_off() {
        struct Boom;
        impl Future for Boom {
            type Output = ();
            fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
                let _ = instant();
                panic!("boom");
            }
        }
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = Pin::new(&mut PollClock(Boom)).poll(&mut cx);
        }));
        assert!(caught.is_err());
        assert!(
            !POLL.with(|p| p.get().on),
            "the poll clock stayed on after a panic"
        );
        assert_reads_the_clock();
    }

    #[test]
    fn nested_polls_restore_the_enclosing_reading() {
        struct Inner;
        impl Future for Inner {
            type Output = Instant;
            fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Instant> {
                Poll::Ready(instant())
            }
        }
        struct Outer;
        impl Future for Outer {
            type Output = (Instant, Instant, Instant);
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                let before = instant();
                std::thread::sleep(Duration::from_millis(2));
                let Poll::Ready(inner) = Pin::new(&mut PollClock(Inner)).poll(cx) else {
                    unreachable!()
                };
                Poll::Ready((before, inner, instant()))
            }
        }
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let Poll::Ready((before, inner, after)) = Pin::new(&mut PollClock(Outer)).poll(&mut cx)
        else {
            unreachable!()
        };
        assert!(inner >= before + Duration::from_millis(2));
        assert_eq!(
            after, before,
            "the enclosing poll's reading was not restored"
        );
    }
}
