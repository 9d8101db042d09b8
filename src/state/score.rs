//! The latency and health score of each (channel, upstream model) for `routing.balance:
//! latency` (R19.1; the arithmetic is `routing::latency::Score`): a moving time to first
//! byte (streams: the time to the commit point) or latency (non-stream: the whole answer),
//! and a moving error rate over upstream faults. Streamed and non-stream requests are scored
//! apart (a whole answer takes longer than a first byte), each request planned by its kind.
//!
//! Scores live in the channel's state, so they survive a reload for the channels that stay
//! (by name) and start neutral for new channels and new upstream models. They are local to
//! the replica: each replica scores what it saw itself.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use crate::fastmap::FastMap;
use crate::lock::lock;
pub use crate::routing::latency::Score;
use crate::routing::outcome::OutcomeFacts;

/// Upstream models scored per channel; they come from the config, so this only bounds a
/// pathological one.
const MAX_MODELS: usize = 256;

/// Recent latencies kept per score for its percentile (`resilience.hedge.after: p95`).
const RECENT: usize = 64;
/// Latencies needed before a percentile is given.
pub const PERCENTILE_MIN_SAMPLES: usize = 20;

/// One score and its recent successful latencies, in seconds, oldest first.
#[derive(Debug)]
struct Entry {
    score: Score,
    recent: VecDeque<f64>,
}

/// A channel's scores by upstream model: `[non-stream, streamed]` (looked up by `&str`,
/// no allocation per attempt once the model is known).
#[derive(Debug, Default)]
pub struct Scores {
    by_model: Mutex<FastMap<String, [Option<Entry>; 2]>>,
}

impl Scores {
    /// Record an attempt's outcome: a success with its time to the answer, an upstream
    /// fault; anything else (the caller's fault, a client that left) says nothing of the
    /// channel's speed or health.
    pub fn record(&self, model: &str, stream: bool, f: &OutcomeFacts, elapsed: Duration) {
        let latency = if f.success {
            Some(elapsed.as_secs_f64())
        } else if f.upstream_fault {
            None
        } else {
            return;
        };
        let mut by_model = lock(&self.by_model);
        if !by_model.contains_key(model) {
            if by_model.len() >= MAX_MODELS {
                return;
            }
            by_model.insert(model.to_string(), [None, None]);
        }
        let Some(pair) = by_model.get_mut(model) else {
            return;
        };
        let entry = pair[usize::from(stream)].get_or_insert_with(|| Entry {
            score: Score::NEW,
            recent: VecDeque::with_capacity(RECENT),
        });
        entry.score.observe(latency);
        if let Some(l) = latency {
            if entry.recent.len() == RECENT {
                entry.recent.pop_front();
            }
            entry.recent.push_back(l);
        }
    }

    /// The score of `model` for streamed (or non-stream) requests, if it has one.
    pub fn get(&self, model: &str, stream: bool) -> Option<Score> {
        let by_model = lock(&self.by_model);
        by_model.get(model)?[usize::from(stream)]
            .as_ref()
            .map(|e| e.score)
    }

    /// The 95th percentile of the last successful latencies (up to 64) of `model` for
    /// streamed (or non-stream) requests; `None` below [`PERCENTILE_MIN_SAMPLES`].
    pub fn p95(&self, model: &str, stream: bool) -> Option<Duration> {
        let by_model = lock(&self.by_model);
        let entry = by_model.get(model)?[usize::from(stream)].as_ref()?;
        if entry.recent.len() < PERCENTILE_MIN_SAMPLES {
            return None;
        }
        let mut latencies: Vec<f64> = entry.recent.iter().copied().collect();
        latencies.sort_by(f64::total_cmp);
        let i = ((latencies.len() as f64 * 0.95).ceil() as usize).clamp(1, latencies.len()) - 1;
        Some(Duration::from_secs_f64(latencies[i].max(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::family::PathFamily;
    use crate::routing::outcome::Outcome;
    use crate::routing::policy::TransportKind;

    fn facts(o: Outcome) -> OutcomeFacts {
        OutcomeFacts::of(&o, &Default::default(), PathFamily::Chat)
    }

    #[test]
    fn successes_and_upstream_faults_count_and_the_callers_faults_do_not() {
        let s = Scores::default();
        assert_eq!(s.get("m", false), None);
        s.record(
            "m",
            false,
            &OutcomeFacts::succeeded(200),
            Duration::from_millis(100),
        );
        assert_eq!(s.get("m", false).and_then(|s| s.latency), Some(0.1));
        s.record(
            "m",
            false,
            &facts(Outcome::Transport(TransportKind::Connect)),
            Duration::ZERO,
        );
        let two = s.get("m", false).unwrap();
        assert!(two.error_rate > 0.0 && two.samples == 2, "{two:?}");
        let caller = Outcome::Status {
            code: 400,
            error_code: None,
            error_type: None,
            message: String::new(),
        };
        s.record("m", false, &facts(caller), Duration::ZERO);
        s.record("m", false, &facts(Outcome::ClientGone), Duration::ZERO);
        assert_eq!(s.get("m", false), Some(two));
        assert_eq!(s.get("other", false), None, "per upstream model");
        assert_eq!(s.get("m", true), None, "per kind");
    }

    #[test]
    fn p95_of_the_recent_latencies_once_there_are_enough() {
        let s = Scores::default();
        let ok = OutcomeFacts::succeeded(200);
        for i in 1..PERCENTILE_MIN_SAMPLES as u64 {
            s.record("m", true, &ok, Duration::from_millis(i * 10));
        }
        assert_eq!(s.p95("m", true), None, "too few");
        s.record("m", true, &ok, Duration::from_millis(200));
        // 20 samples 10..=200 ms: the 19th smallest.
        assert_eq!(s.p95("m", true), Some(Duration::from_millis(190)));
        // Only the last 64 count.
        for _ in 0..64 {
            s.record("m", true, &ok, Duration::from_millis(5));
        }
        assert_eq!(s.p95("m", true), Some(Duration::from_millis(5)));
        assert_eq!(s.p95("m", false), None);
    }
}
