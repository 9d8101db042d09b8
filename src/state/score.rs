//! The latency and health score of each (channel, upstream model) for `routing.balance:
//! latency` (R19.1; the arithmetic is `routing::latency::Score`): a moving time to first
//! byte (streams: the time to the commit point) or latency (non-stream: the whole answer),
//! and a moving error rate over upstream faults. Streamed and non-stream requests are scored
//! apart (a whole answer takes longer than a first byte), each request planned by its kind.
//!
//! Scores live in the channel's state, so they survive a reload for the channels that stay
//! (by name) and start neutral for new channels and new upstream models. They are local to
//! the replica: each replica scores what it saw itself.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

pub use crate::routing::latency::Score;
use crate::routing::outcome::OutcomeFacts;
use crate::sync::lock;

/// Upstream models scored per channel; they come from the config, so this only bounds a
/// pathological one.
const MAX_MODELS: usize = 256;

/// A channel's scores by (upstream model, streamed).
#[derive(Debug, Default)]
pub struct Scores {
    by_model: Mutex<HashMap<(String, bool), Score>>,
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
        let mut m = lock(&self.by_model);
        let key = (model.to_string(), stream);
        if !m.contains_key(&key) && m.len() >= MAX_MODELS {
            return;
        }
        m.entry(key).or_insert(Score::NEW).observe(latency);
    }

    /// The score of `model` for streamed (or non-stream) requests, if it has one.
    pub fn get(&self, model: &str, stream: bool) -> Option<Score> {
        lock(&self.by_model)
            .get(&(model.to_string(), stream))
            .copied()
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
}
