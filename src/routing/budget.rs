//! Gateway-wide retry budget over a sliding window of one-second buckets (R4.9).
//!
//! Retries and failovers are allowed while
//! `retries_in_window < ratio × first_attempts_in_window + min_per_second × ttl_secs`.
//! One small mutex guards `ttl_secs` buckets; each call holds it for O(ttl_secs).
//!
//! Shared across replicas (R17.1, approximately): the shared-state runtime takes this
//! replica's new counts every [`SHARE_EVERY`] ([`RetryBudget::take_pending`]), adds them to
//! the deployment's window in Redis and hands back the other replicas' share of that
//! window ([`RetryBudget::set_others`]); the rule above then runs on the deployment's
//! totals. The bound: the others' counts are at most one exchange old, so the deployment
//! may take at most the retries the replicas' own windows allow in one [`SHARE_EVERY`]
//! beyond its budget. When the exchange has not succeeded for [`OTHERS_STALE`] (Redis
//! unreachable), each replica runs on its own counts with the floor divided by the
//! replica count.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Whole seconds since `origin` this bucket counts; stale when too old.
    second: u64,
    firsts: u64,
    retries: u64,
}

/// How often the shared-state runtime exchanges counts with the other replicas.
pub const SHARE_EVERY: Duration = Duration::from_secs(1);
/// Others' counts older than this are ignored (the exchange is failing).
pub const OTHERS_STALE: Duration = Duration::from_secs(3);

/// The other replicas' counts in the window, as of `at`.
#[derive(Debug, Clone, Copy)]
struct Others {
    firsts: u64,
    retries: u64,
    at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    buckets: Vec<Bucket>,
    /// Counts not yet handed to the shared-state runtime (firsts, retries).
    pending: (u64, u64),
    /// `Some(replicas)` when the budget is shared.
    replicas: Option<u32>,
    others: Option<Others>,
}

/// Shared retry budget (thread-safe; clone an `Arc` of it across requests).
#[derive(Debug)]
pub struct RetryBudget {
    ratio: f64,
    min_per_second: u32,
    window: u64,
    origin: Instant,
    buckets: Mutex<Inner>,
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
            buckets: Mutex::new(Inner {
                buckets: vec![Bucket::default(); window as usize],
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::lock::lock(&self.buckets)
    }

    /// The window in whole seconds.
    pub fn window_secs(&self) -> u64 {
        self.window
    }

    /// Share this budget across `replicas` replicas (idempotent).
    pub fn share(&self, replicas: u32) {
        self.lock().replicas = Some(replicas.max(1));
    }

    /// This replica's counts since the last call (firsts, retries).
    pub fn take_pending(&self) -> (u64, u64) {
        std::mem::take(&mut self.lock().pending)
    }

    /// This replica's counts in the window now (firsts, retries).
    pub fn local_window(&self) -> (u64, u64) {
        let now = self.now_second();
        let window = self.window;
        self.lock()
            .buckets
            .iter()
            .filter(|x| x.second + window > now && x.second <= now)
            .fold((0, 0), |(f, r), x| (f + x.firsts, r + x.retries))
    }

    /// The other replicas' counts in the window as last exchanged, while fresh
    /// (firsts, retries); zeros when stale or never exchanged.
    pub fn others(&self) -> (u64, u64) {
        match self.lock().others {
            Some(o) if o.at.elapsed() <= OTHERS_STALE => (o.firsts, o.retries),
            _ => (0, 0),
        }
    }

    /// The other replicas' counts in the window (the deployment's minus this one's).
    pub fn set_others(&self, firsts: u64, retries: u64) {
        self.lock().others = Some(Others {
            firsts,
            retries,
            at: Instant::now(),
        });
    }

    fn now_second(&self) -> u64 {
        crate::clock::instant()
            .saturating_duration_since(self.origin)
            .as_secs()
    }

    fn with_current<R>(&self, f: impl FnOnce(&mut Inner, usize, u64) -> R) -> R {
        let now = self.now_second();
        let mut inner = self.lock();
        let slot = (now % self.window) as usize;
        if inner.buckets[slot].second != now {
            inner.buckets[slot] = Bucket {
                second: now,
                ..Bucket::default()
            };
        }
        f(&mut inner, slot, now)
    }

    /// Count a request's first upstream attempt.
    pub fn record_first_attempt(&self) {
        self.with_current(|i, slot, _| {
            i.buckets[slot].firsts += 1;
            i.pending.0 += 1;
        });
    }

    /// Take one retry/failover from the budget; false when it is spent.
    pub fn try_acquire_retry(&self) -> bool {
        let window = self.window;
        let ratio = self.ratio;
        let floor = u64::from(self.min_per_second) * window;
        self.with_current(|i, slot, now| {
            let (firsts, retries) = i
                .buckets
                .iter()
                .filter(|x| x.second + window > now && x.second <= now)
                .fold((0u64, 0u64), |(f, r), x| (f + x.firsts, r + x.retries));
            let (of, or, floor) = match (i.replicas, i.others) {
                (None, _) => (0, 0, floor as f64),
                (Some(_), Some(o)) if o.at.elapsed() <= OTHERS_STALE => {
                    (o.firsts, o.retries, floor as f64)
                }
                (Some(n), _) => (0, 0, floor as f64 / f64::from(n)),
            };
            let allowed = ratio * (firsts + of) as f64 + floor;
            if ((retries + or) as f64) < allowed {
                i.buckets[slot].retries += 1;
                i.pending.1 += 1;
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

    /// R17.1: the others' counts take from this replica's budget while fresh; stale ones
    /// (Redis unreachable) are dropped and the floor is divided by the replica count.
    #[tokio::test(start_paused = true)]
    async fn others_count_while_fresh_and_floor_divides_when_stale() {
        let b = RetryBudget::new(0.5, 3, Duration::from_secs(10));
        b.share(3);
        for _ in 0..10 {
            b.record_first_attempt();
        }
        assert_eq!(b.take_pending(), (10, 0));
        // Others: 30 firsts, 18 retries. Allowed = 0.5 × 40 + 30 = 50, 18 taken: 32 left.
        b.set_others(30, 18);
        assert_eq!(drain(&b), 32);
        assert_eq!(b.take_pending(), (0, 32));
        assert_eq!(b.local_window(), (10, 32));
        tokio::time::advance(OTHERS_STALE + Duration::from_millis(1)).await;
        // Stale: own counts only, floor 30 / 3 = 10: 0.5 × 10 + 10 = 15 < 32 taken.
        assert_eq!(drain(&b), 0);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(drain(&b), 10, "an empty window: the divided floor");
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
