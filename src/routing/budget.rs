//! Gateway-wide retry budget over a sliding window of one-second buckets (R4.9).
//!
//! Retries and failovers are allowed while
//! `retries_in_window < ratio × first_attempts_in_window + min_per_second × ttl_secs`.
//! One small mutex guards `ttl_secs` buckets; each call holds it for O(ttl_secs).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Whole seconds since `origin` this bucket counts; stale when too old.
    second: u64,
    firsts: u64,
    retries: u64,
}

/// Shared retry budget (thread-safe; clone an `Arc` of it across requests).
#[derive(Debug)]
pub struct RetryBudget {
    ratio: f64,
    min_per_second: u32,
    window: u64,
    origin: Instant,
    buckets: Mutex<Vec<Bucket>>,
}

impl RetryBudget {
    /// `ttl` is rounded up to whole seconds (at least one).
    pub fn new(ratio: f64, min_per_second: u32, ttl: Duration) -> Self {
        let mut window = ttl.as_secs();
        if ttl.subsec_nanos() > 0 || window == 0 {
            window += 1;
        }
        let ratio = if ratio.is_finite() {
            ratio.max(0.0)
        } else {
            0.0
        };
        RetryBudget {
            ratio,
            min_per_second,
            window,
            origin: Instant::now(),
            buckets: Mutex::new(vec![Bucket::default(); window as usize]),
        }
    }

    fn now_second(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.origin)
            .as_secs()
    }

    fn with_current<R>(&self, f: impl FnOnce(&mut Vec<Bucket>, usize, u64) -> R) -> R {
        let now = self.now_second();
        let mut buckets = crate::sync::lock(&self.buckets);
        let slot = (now % self.window) as usize;
        if buckets[slot].second != now {
            buckets[slot] = Bucket {
                second: now,
                ..Bucket::default()
            };
        }
        f(&mut buckets, slot, now)
    }

    /// Count a request's first upstream attempt.
    pub fn record_first_attempt(&self) {
        self.with_current(|b, slot, _| b[slot].firsts += 1);
    }

    /// Take one retry/failover from the budget; false when it is spent.
    pub fn try_acquire_retry(&self) -> bool {
        let window = self.window;
        let ratio = self.ratio;
        let floor = u64::from(self.min_per_second) * window;
        self.with_current(|b, slot, now| {
            let (firsts, retries) = b
                .iter()
                .filter(|x| x.second + window > now && x.second <= now)
                .fold((0u64, 0u64), |(f, r), x| (f + x.firsts, r + x.retries));
            let allowed = ratio * firsts as f64 + floor as f64;
            if (retries as f64) < allowed {
                b[slot].retries += 1;
                true
            } else {
                false
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn drain(b: &RetryBudget) -> u32 {
        let mut n = 0;
        while b.try_acquire_retry() {
            n += 1;
            assert!(n < 100_000);
        }
        n
    }

    #[tokio::test(start_paused = true)]
    async fn floor_only_without_traffic() {
        let b = RetryBudget::new(0.2, 10, Duration::from_secs(10));
        assert_eq!(drain(&b), 100);
        assert!(!b.try_acquire_retry());
    }

    #[tokio::test(start_paused = true)]
    async fn ratio_of_first_attempts() {
        let b = RetryBudget::new(0.2, 0, Duration::from_secs(10));
        assert!(!b.try_acquire_retry());
        for _ in 0..50 {
            b.record_first_attempt();
        }
        assert_eq!(drain(&b), 10);
        for _ in 0..5 {
            b.record_first_attempt();
        }
        assert_eq!(drain(&b), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn window_slides() {
        let b = RetryBudget::new(0.0, 1, Duration::from_secs(3));
        assert_eq!(drain(&b), 3);
        tokio::time::advance(Duration::from_secs(1)).await;
        // the spent retries are still in the window
        assert_eq!(drain(&b), 0);
        tokio::time::advance(Duration::from_secs(2)).await;
        // the first second's three retries have left the window
        assert_eq!(drain(&b), 3);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(drain(&b), 3);
    }

    #[test]
    fn shared_across_threads() {
        let b = Arc::new(RetryBudget::new(0.0, 5, Duration::from_secs(2)));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || (0..10).filter(|_| b.try_acquire_retry()).count())
            })
            .collect();
        let total: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total, 10);
    }
}
