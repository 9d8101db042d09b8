//! hyper's HTTP/1 header-read timer (R14.2, `limits.header_read_timeout`), timed from the
//! first byte of each request head.
//!
//! hyper starts its header-read timeout when it begins waiting for the next head: on a
//! kept-alive connection, as soon as the last response is sent. The time a client's pooled
//! connection sat idle therefore counted against its next head, and a client that came back
//! after longer than the timeout with a head split across two reads was cut in the middle of
//! it. hyper-util's timer also put a tokio sleep in the timer wheel and took it out again
//! on every request (callgrind, 500 short requests: ~560 of the ~1,400 instructions a
//! request the header timeout costs in all; the rest is hyper's own bookkeeping).
//!
//! Here the connection's byte tracker (`sniff::Sniffed`) stamps the read that leaves a head
//! incomplete ([`HeadClock`]); the sleep hyper polls while a head is incomplete ends at that
//! stamp plus the timeout and enters the wheel only then. With no head under way the
//! connection is idle: its first head and its idle time are the connection watchdog's
//! (`conn`). When the tracker no longer follows the framing (HTTP/2, an upgrade, a framing
//! it does not read), hyper's own deadline applies, as before.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// A year: the deadline of a sleep whose end overflows the clock (never reached).
const FAR: Duration = Duration::from_secs(365 * 86_400);
/// `HeadClock::stamp` when the tracker no longer follows the framing.
const UNTRACKED: u64 = u64::MAX;

/// Where a connection's next request head stands, as its byte tracker saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// No head under way: idle, or a body being read.
    None,
    /// A head under way since this read.
    Since(Instant),
    /// The framing is not followed: hyper's deadline applies.
    Untracked,
}

/// When the current request head of one connection began (shared by its reader and its
/// timer; both live on the connection's serving thread).
#[derive(Debug)]
pub struct HeadClock {
    epoch: Instant,
    /// 0: no head under way; [`UNTRACKED`]; else nanoseconds since `epoch`, plus one.
    stamp: AtomicU64,
}

impl HeadClock {
    pub fn new() -> Arc<HeadClock> {
        Arc::new(HeadClock {
            epoch: Instant::now(),
            stamp: AtomicU64::new(0),
        })
    }

    /// A read left a head incomplete: the head's time starts now, unless it already ran.
    /// One clock reading per head that spans reads; a head whole in one read costs none.
    pub fn incomplete(&self) {
        if self.stamp.load(Ordering::Relaxed) == 0 {
            let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(UNTRACKED - 1);
            self.stamp.store(
                nanos.saturating_add(1).min(UNTRACKED - 1),
                Ordering::Relaxed,
            );
        }
    }

    /// No head under way (it ended, or a body is being read).
    pub fn between(&self) {
        if self.stamp.load(Ordering::Relaxed) != UNTRACKED {
            self.stamp.store(0, Ordering::Relaxed);
        }
    }

    /// The tracker stopped following the framing, for the connection's life.
    pub fn untracked(&self) {
        self.stamp.store(UNTRACKED, Ordering::Relaxed);
    }

    pub fn head(&self) -> Head {
        match self.stamp.load(Ordering::Relaxed) {
            0 => Head::None,
            UNTRACKED => Head::Untracked,
            n => Head::Since(self.epoch + Duration::from_nanos(n - 1)),
        }
    }
}

/// hyper's [`Timer`] for one HTTP/1 connection: its sleeps end `timeout` after the head
/// began (see the module doc).
#[derive(Debug, Clone)]
pub struct HeadTimer {
    clock: Arc<HeadClock>,
    timeout: Duration,
}

impl HeadTimer {
    pub fn new(clock: Arc<HeadClock>, timeout: Duration) -> HeadTimer {
        HeadTimer { clock, timeout }
    }
}

fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d).or_else(|| t.checked_add(FAR)).unwrap_or(t)
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(after(Instant::now(), duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        Box::pin(HeadSleep {
            clock: self.clock.clone(),
            timeout: self.timeout,
            hyper_deadline: deadline,
            armed: None,
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HeadSleep>() {
            Some(s) => s.get_mut().hyper_deadline = new_deadline,
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// hyper's header-read sleep: see the module doc.
pub struct HeadSleep {
    clock: Arc<HeadClock>,
    timeout: Duration,
    /// The deadline hyper set (from when it began waiting for the head).
    hyper_deadline: Instant,
    /// tokio's sleep, made when a head is first found under way, moved when its end moves.
    armed: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let deadline = match this.clock.head() {
            // No byte of a head yet: reading it wakes hyper, which polls this again.
            Head::None => return Poll::Pending,
            Head::Since(start) => after(start, this.timeout),
            Head::Untracked => this.hyper_deadline,
        };
        let deadline = tokio::time::Instant::from_std(deadline);
        let armed = this
            .armed
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if armed.deadline() != deadline {
            armed.as_mut().reset(deadline);
        }
        armed.as_mut().poll(cx)
    }
}

impl Sleep for HeadSleep {}

#[cfg(test)]
#[path = "timer_tests.rs"]
mod tests;
