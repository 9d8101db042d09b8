//! Route cooldown (R6.4): the breaker mechanism with the logical-group preset —
//! `consecutive_retryable_failures` upstream faults in a row (5xx, 429, 408, transport; see
//! [`verdict`]) cool the channel down for `duration`.
//!
//! A cooled-down channel is left out of new plans and new affinity bindings; unlike an open
//! breaker it never refuses an attempt that the plan still makes (when every channel is
//! unavailable the plan falls back to all of them).

use crate::lock::lock;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::{Core, Limits, State, Verdict};
use crate::config::model::Cooldown as CooldownCfg;
use crate::routing::outcome::OutcomeFacts;

/// The breaker thresholds of the cooldown preset.
pub fn limits(cfg: &CooldownCfg) -> Limits {
    Limits {
        failure_threshold: cfg.consecutive_retryable_failures,
        success_threshold: 1,
        timeout: cfg.duration,
    }
}

/// How an attempt counts for the cooldown: only upstream faults count
/// ([`OutcomeFacts::upstream_fault`]: a 5xx, 429 or 408 after `status_code_mapping`, a
/// transport error, a `channel:*` error). A caller's 4xx (400, 404, 413, 422, ...) is
/// neutral: two bad requests from one client must not cool a channel down for everyone.
/// Successes reset.
pub fn verdict(f: &OutcomeFacts) -> Verdict {
    if f.success {
        Verdict::Success
    } else if f.upstream_fault {
        Verdict::Failure
    } else {
        Verdict::Neutral
    }
}

/// One channel's cooldown.
#[derive(Debug)]
pub struct Cooldown {
    core: Mutex<Core>,
}

impl Default for Cooldown {
    fn default() -> Self {
        Cooldown {
            core: Mutex::new(Core::new(Instant::now())),
        }
    }
}

impl Cooldown {
    /// Is the channel cooling down at `now`? Non-mutating.
    pub fn is_cooled_down(&self, cfg: &CooldownCfg, now: Instant) -> bool {
        let lim = limits(cfg);
        lim.failure_threshold > 0 && lock(&self.core).state(&lim, now) == State::Open
    }

    /// Time left in the cooldown, if any.
    pub fn remaining(&self, cfg: &CooldownCfg, now: Instant) -> Option<Duration> {
        let lim = limits(cfg);
        if lim.failure_threshold == 0 {
            return None;
        }
        lock(&self.core).open_remaining(&lim, now)
    }

    /// Record one target visit; returns true when this result started a cooldown.
    pub fn record(&self, cfg: &CooldownCfg, verdict: Verdict, now: Instant) -> bool {
        let transition = lock(&self.core).record(&limits(cfg), verdict, false, now);
        transition.is_some_and(|t| t.to == State::Open)
    }

    pub fn reset(&self) {
        *lock(&self.core) = Core::new(Instant::now());
    }

    /// Another replica started a cooldown with `remaining` left (R17.1).
    pub fn apply(&self, cfg: &CooldownCfg, remaining: Duration, now: Instant) {
        let mut lim = limits(cfg);
        // The other replica's duration may differ (another config generation): its
        // remaining time is what counts.
        lim.timeout = lim.timeout.max(remaining);
        lock(&self.core).force_open(&lim, remaining, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::family::PathFamily;
    use crate::routing::policy::Outcome;

    /// The cooldown verdict of `o` on a channel with `mapping` (its facts derived first).
    fn verdict(o: &Outcome, mapping: &std::collections::BTreeMap<u16, u16>) -> Verdict {
        super::verdict(&OutcomeFacts::of(o, mapping, PathFamily::Chat))
    }

    fn outcome(code: u16) -> Outcome {
        Outcome::Status {
            code,
            error_code: None,
            error_type: None,
            message: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retryable_failures_in_a_row_cool_down_for_duration() {
        let cfg = CooldownCfg {
            consecutive_retryable_failures: 2,
            duration: Duration::from_secs(600),
        };
        let c = Cooldown::default();
        assert!(!c.record(&cfg, Verdict::Failure, Instant::now()));
        assert!(!c.record(&cfg, Verdict::Success, Instant::now()), "reset");
        assert!(!c.record(&cfg, Verdict::Failure, Instant::now()));
        assert!(!c.is_cooled_down(&cfg, Instant::now()));
        assert!(c.record(&cfg, Verdict::Failure, Instant::now()));
        assert!(c.is_cooled_down(&cfg, Instant::now()));
        tokio::time::advance(Duration::from_secs(599)).await;
        assert!(c.is_cooled_down(&cfg, Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!c.is_cooled_down(&cfg, Instant::now()));
        let off = CooldownCfg {
            consecutive_retryable_failures: 0,
            ..cfg.clone()
        };
        c.record(&cfg, Verdict::Failure, Instant::now());
        assert!(
            c.is_cooled_down(&cfg, Instant::now()),
            "a failure after it re-cools"
        );
        assert!(!c.is_cooled_down(&off, Instant::now()), "0 = off");
    }

    /// R6.4: only upstream faults count; a caller's 4xx never cools a channel,
    /// whatever `failover_on` says; the status is read after `status_code_mapping`.
    #[test]
    fn only_upstream_faults_count() {
        let none = Default::default();
        let v = |o: &Outcome| verdict(o, &none);
        for code in [500, 502, 503, 504, 524, 529, 429, 408] {
            assert_eq!(v(&outcome(code)), Verdict::Failure, "{code}");
        }
        for code in [400, 401, 403, 404, 409, 413, 422, 451] {
            assert_eq!(v(&outcome(code)), Verdict::Neutral, "{code}");
        }
        assert_eq!(v(&outcome(200)), Verdict::Success);
        assert_eq!(v(&Outcome::ClientGone), Verdict::Neutral);
        assert_eq!(
            v(&Outcome::Transport(
                crate::routing::policy::TransportKind::Reset
            )),
            Verdict::Failure
        );
        let mapping = [(400u16, 503u16), (502, 400)].into_iter().collect();
        assert_eq!(verdict(&outcome(400), &mapping), Verdict::Failure, "mapped");
        assert_eq!(verdict(&outcome(502), &mapping), Verdict::Neutral, "mapped");
    }

    /// Two bad requests in a row (400, 422) never start a cooldown.
    #[tokio::test(start_paused = true)]
    async fn caller_errors_never_cool_a_channel() {
        let cfg = CooldownCfg {
            consecutive_retryable_failures: 2,
            duration: Duration::from_secs(600),
        };
        let c = Cooldown::default();
        let none = Default::default();
        for code in [400, 422, 404, 401] {
            assert!(!c.record(&cfg, verdict(&outcome(code), &none), Instant::now()));
        }
        assert!(!c.is_cooled_down(&cfg, Instant::now()));
        c.record(&cfg, verdict(&outcome(503), &none), Instant::now());
        assert!(c.record(&cfg, verdict(&outcome(429), &none), Instant::now()));
        assert!(c.is_cooled_down(&cfg, Instant::now()));
    }
}
