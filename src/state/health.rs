//! Provider health (R7.3): a sliding 10-minute window of real outcomes per channel
//! in 10-second buckets (bounded memory), plus the result of the last model listing.

use crate::lock::lock;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::routing::outcome::OutcomeFacts;

/// Length of the window.
pub const WINDOW: Duration = Duration::from_secs(600);
const BUCKET: Duration = Duration::from_secs(10);
const BUCKETS: usize = (WINDOW.as_secs() / BUCKET.as_secs()) as usize;

/// A channel is degraded with at least this many errors in its window...
pub const MIN_ERRORS: u32 = 3;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    slot: u64,
    ok: u32,
    err: u32,
}

/// Counts over the current window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub ok: u32,
    pub errors: u32,
}

impl Counts {
    /// ≥3 errors making up ≥50 % of the window (R7.3).
    pub fn degraded(&self) -> bool {
        self.errors >= MIN_ERRORS && self.errors * 2 >= self.ok + self.errors
    }
}

/// Result of the last model listing (`GET {base}/models`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Discovery {
    pub ok: bool,
    /// HTTP status, or None for a transport failure / timeout.
    pub status: Option<u16>,
    pub at_ms: i64,
    #[serde(skip)]
    pub at: Instant,
}

#[derive(Debug)]
struct Inner {
    buckets: [Bucket; BUCKETS],
    discovery: Option<Discovery>,
}

#[derive(Debug)]
pub struct Health {
    base: Instant,
    inner: Mutex<Inner>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            base: Instant::now(),
            inner: Mutex::new(Inner {
                buckets: [Bucket::default(); BUCKETS],
                discovery: None,
            }),
        }
    }
}

/// Does an attempt count in the window, and as an error? Client cancels, local adapter
/// errors and the request deadline are not the upstream's doing: `None`. Every other
/// failure counts — including 4xx that never trip a breaker (R7.3).
pub fn is_error(f: &OutcomeFacts) -> Option<bool> {
    f.counted.then_some(!f.success)
}

impl Health {
    fn slot(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.base).as_secs() / BUCKET.as_secs()) + 1
    }

    pub fn record(&self, error: bool, now: Instant) {
        let slot = self.slot(now);
        let mut inner = lock(&self.inner);
        let bucket = &mut inner.buckets[(slot % BUCKETS as u64) as usize];
        if bucket.slot != slot {
            *bucket = Bucket {
                slot,
                ..Bucket::default()
            };
        }
        if error {
            bucket.err = bucket.err.saturating_add(1);
        } else {
            bucket.ok = bucket.ok.saturating_add(1);
        }
    }

    pub fn counts(&self, now: Instant) -> Counts {
        let slot = self.slot(now);
        let oldest = slot.saturating_sub(BUCKETS as u64 - 1);
        let inner = lock(&self.inner);
        inner
            .buckets
            .iter()
            .filter(|b| b.slot >= oldest && b.slot <= slot && b.slot > 0)
            .fold(Counts::default(), |c, b| Counts {
                ok: c.ok + b.ok,
                errors: c.errors + b.err,
            })
    }

    pub fn set_discovery(&self, discovery: Discovery) {
        lock(&self.inner).discovery = Some(discovery);
    }

    pub fn discovery(&self) -> Option<Discovery> {
        lock(&self.inner).discovery.clone()
    }

    pub fn reset(&self) {
        let mut inner = lock(&self.inner);
        inner.buckets = [Bucket::default(); BUCKETS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::policy::Outcome;

    #[tokio::test(start_paused = true)]
    async fn degraded_needs_three_errors_and_half() {
        let h = Health::default();
        let now = Instant::now();
        h.record(true, now);
        h.record(true, now);
        assert!(!h.counts(now).degraded(), "two errors are not enough");
        h.record(true, now);
        assert!(h.counts(now).degraded());
        for _ in 0..3 {
            h.record(false, now);
        }
        assert_eq!(h.counts(now), Counts { ok: 3, errors: 3 });
        assert!(h.counts(now).degraded(), "50 % is degraded");
        h.record(false, now);
        assert!(!h.counts(now).degraded(), "3 of 7 is below half");
    }

    #[tokio::test(start_paused = true)]
    async fn window_slides_after_ten_minutes() {
        let h = Health::default();
        for _ in 0..5 {
            h.record(true, Instant::now());
        }
        tokio::time::advance(Duration::from_secs(300)).await;
        h.record(false, Instant::now());
        assert_eq!(h.counts(Instant::now()), Counts { ok: 1, errors: 5 });
        tokio::time::advance(Duration::from_secs(305)).await;
        assert_eq!(
            h.counts(Instant::now()),
            Counts { ok: 1, errors: 0 },
            "the errors left the window, the later success did not"
        );
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(h.counts(Instant::now()), Counts::default());
    }

    fn is_error(o: &crate::routing::policy::Outcome) -> Option<bool> {
        let f = OutcomeFacts::of(
            o,
            &Default::default(),
            crate::routing::family::PathFamily::Chat,
        );
        super::is_error(&f)
    }

    #[test]
    fn client_side_outcomes_do_not_count() {
        assert_eq!(is_error(&Outcome::ClientGone), None);
        assert_eq!(is_error(&Outcome::Success), Some(false));
        let s = |code| Outcome::Status {
            code,
            error_code: None,
            error_type: None,
            message: String::new(),
        };
        assert_eq!(is_error(&s(400)), Some(true));
        assert_eq!(is_error(&s(200)), Some(false));
    }
}
