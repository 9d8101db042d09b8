//! Route cooldown (R6.4, seed 002): the breaker mechanism with the logical-group preset —
//! `consecutive_retryable_failures` in a row cool the channel down for `duration`.
//!
//! A cooled-down channel is left out of new plans and new affinity bindings; unlike an open
//! breaker it never refuses an attempt that the plan still makes (when every channel is
//! unavailable the plan falls back to all of them).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::{Core, Limits, State, Verdict};
use crate::config::model::{Cooldown as CooldownCfg, Retry, Routing};
use crate::routing::policy::{map_status, Outcome};

/// The breaker thresholds of the cooldown preset.
pub fn limits(cfg: &CooldownCfg) -> Limits {
    Limits {
        failure_threshold: cfg.consecutive_retryable_failures,
        success_threshold: 1,
        timeout: cfg.duration,
    }
}

/// How an outcome counts for the cooldown: retryable failures (statuses that fail over or are
/// in `retry_on`, transport errors) count; successes reset; everything else is neutral.
pub fn verdict(
    outcome: &Outcome,
    mapping: &std::collections::BTreeMap<u16, u16>,
    routing: &Routing,
    retry: &Retry,
) -> Verdict {
    match outcome {
        Outcome::Success => Verdict::Success,
        Outcome::Status { code, .. } => {
            let code = map_status(*code, mapping);
            if (200..300).contains(&code) {
                Verdict::Success
            } else if (routing.failover_on.contains(code)
                && !routing.never_failover_on.contains(code))
                || retry.retry_on.contains(code)
            {
                Verdict::Failure
            } else {
                Verdict::Neutral
            }
        }
        Outcome::Transport(_) | Outcome::ChannelError(_) => Verdict::Failure,
        _ => Verdict::Neutral,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
    pub fn record(&self, cfg: &CooldownCfg, v: Verdict, now: Instant) -> bool {
        let t = lock(&self.core).record(&limits(cfg), v, false, now);
        t.is_some_and(|t| t.to == State::Open)
    }

    pub fn reset(&self) {
        *lock(&self.core) = Core::new(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::merge::default_resilience;

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

    #[test]
    fn only_retryable_failures_count() {
        let r = default_resilience();
        let routing = crate::config::model::Routing {
            retry_times: 3,
            tier_walk: crate::config::model::TierWalk::Exhaust,
            failover_on: crate::config::status_set::StatusSet::parse("401-407,409-503,505-523")
                .unwrap(),
            never_failover_on: crate::config::status_set::StatusSet::parse("504,524").unwrap(),
            retry_budget: crate::config::model::RetryBudget {
                ratio: 0.2,
                min_per_second: 10,
                ttl: Duration::from_secs(10),
            },
        };
        let none = Default::default();
        let v = |o: &Outcome| verdict(o, &none, &routing, &r.retry);
        assert_eq!(v(&outcome(503)), Verdict::Failure);
        assert_eq!(v(&outcome(504)), Verdict::Failure, "504 is in retry_on");
        assert_eq!(v(&outcome(400)), Verdict::Neutral);
        assert_eq!(v(&outcome(200)), Verdict::Success);
        assert_eq!(v(&Outcome::ClientGone), Verdict::Neutral);
    }
}
