//! The one pure outcome classifier (R4.4, R4.5, R10.1, R10.3, R10.5).
//!
//! Readings of the spec, decided here once:
//! - Order: `status_code_mapping` first; success; client gone / deadline /
//!   local adapter error stop; no attempts left stops; affinity skip-retry
//!   stops; a non-retryable family (R10.1) stops, except images under
//!   `images_failover` (R10.3 whitelist); task relay rules (R10.5); then the
//!   general rules below. `channel:*` errors are therefore not replayed on a
//!   non-retryable family either: the artifact rule wins.
//! - Same-target retries (R4.5): a code that may fail over fails over while
//!   another (channel, key) target remains; only when none remains is the same
//!   target retried, if the code is in `retry.retry_on` and `max_retries` is
//!   not used up. A code that must not fail over (`never_failover_on`, e.g.
//!   504/524, or anything outside `failover_on`) is returned at once while
//!   alternatives remain (R4.4); when the target is the only one, it is
//!   retried on the same target if it is in `retry_on` (R4.5: 524 retries
//!   model1 on a single target). SPEC R4.5 decides between the seeds: same-target
//!   retries happen only once every candidate has been tried.
//! - Transport errors count as in `retry_on`, except the timeouts (header,
//!   first byte, body): R4.5 says a local client timeout returns at once,
//!   so a timeout fails over to another target but never repeats on the
//!   same one.
//! - Images (R10.3): connect/DNS/TLS failures never reached the upstream, so
//!   they count as pre-generation rejections (tier 1). A replay always moves
//!   to the next key first (`key_fault: true`). With no target left, the
//!   per-key budget `key_retry_budget` allows same-key replays: for every
//!   replayable failure under `include_uncertain`, only for the ambiguous 5xx
//!   (tier 2, not 503/529/530) under `include_ambiguous`, never in tier 1 (R10.3).
//! - Task relay (R10.5): a configured task path (`tasks.paths`) follows the
//!   R10.5 task rule *instead of* the R10.1 family matrix — the operator
//!   declares by listing the path that a submission is accepted or rejected as a
//!   whole (a task id comes back), so a rejected submit is safe to replay.
//!   Gateway-side timeouts count as 504 (never replayed). Follow-ups are task
//!   calls too; their plan holds only the locked channel.

use std::time::Duration;

use super::family::{replayable, PathFamily};
pub use super::outcome::{
    is_key_fault, map_status, possibly_charged, Outcome, OutcomeFacts, TransportKind,
};
use crate::config::model::{ImagesFailover, Retry, Routing};

/// Request facts the decision depends on, the request's limits included: the breaker's
/// admission of this attempt, the time left before the deadline and the retry budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub family: PathFamily,
    pub has_idempotency_key: bool,
    pub is_task: bool,
    /// Another (channel, key) target remains in the plan.
    pub alternatives_left: bool,
    /// Retries already made on the current target.
    pub same_target_retries: u32,
    pub attempts_left: u32,
    pub affinity_skip_retry: bool,
    /// The breaker admitted this attempt outright: not refused, not a half-open probe
    /// (R6.1: a refused target is not retried, and a probe makes one attempt).
    pub breaker_admitted: bool,
    /// Time left before the request deadline (R4.7).
    pub time_left: Duration,
    /// The wait before a same-target retry of this target (R4.5), drawn with its jitter.
    pub retry_backoff: Duration,
    /// The retry budget has room for one more retry or failover (R4.9).
    pub retry_budget: bool,
}

/// Configuration the decision depends on (the current channel's effective values).
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    pub routing: &'a Routing,
    pub retry: &'a Retry,
    pub images: &'a ImagesFailover,
}

/// What the attempt loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Success: relay the response.
    Done,
    /// Try a different target; `key_fault` moves to the channel's next key first.
    FailOver { key_fault: bool },
    /// Try the same (channel, key) again after backoff; `attempt` is the 1-based retry number.
    RetrySame { attempt: u32 },
    /// Give this outcome to the client.
    Return,
    /// A same-target retry was due but its backoff outlasts the deadline: answer with the
    /// deadline error (R4.7).
    OutOfTime,
    /// A retry or failover was due but the retry budget is spent: give this outcome to the
    /// client (R4.9).
    OutOfBudget,
}

impl Decision {
    /// Does this decision end the request's attempts?
    pub fn ends(&self) -> bool {
        matches!(
            self,
            Decision::Done | Decision::Return | Decision::OutOfTime | Decision::OutOfBudget
        )
    }

    /// Does carrying out this decision make another attempt (and spend a retry)? A failover
    /// with no target left makes none.
    pub fn retries(&self, facts: &Facts) -> bool {
        match self {
            Decision::RetrySame { .. } => true,
            Decision::FailOver { .. } => facts.alternatives_left,
            _ => false,
        }
    }
}

/// Classify one attempt's outcome. Pure: same inputs, same decision.
pub fn classify(o: &OutcomeFacts, facts: &Facts, s: &Settings) -> Decision {
    limit(intent(o, facts, s), facts)
}

/// Classify, taking the retry budget's answer only when the decision spends it:
/// `take_retry` takes one retry from the budget (false when it is spent) and is called at
/// most once, for a decision that makes another attempt.
pub fn decide(
    outcome: &OutcomeFacts,
    facts: &Facts,
    settings: &Settings,
    take_retry: impl FnOnce() -> bool,
) -> Decision {
    let room = Facts {
        retry_budget: true,
        ..*facts
    };
    let decision = classify(outcome, &room, settings);
    if decision.retries(facts) && !take_retry() {
        let spent = Facts {
            retry_budget: false,
            ..*facts
        };
        return classify(outcome, &spent, settings);
    }
    decision
}

/// What the request's limits make of the intended decision, in this order: a refused or
/// probing target is not retried (R6.1); a retry whose backoff outlasts the deadline ends
/// the request (R4.7); past the retry budget the outcome is returned (R4.9).
fn limit(d: Decision, facts: &Facts) -> Decision {
    match d {
        Decision::RetrySame { .. } if !facts.breaker_admitted => Decision::Return,
        Decision::RetrySame { .. } if facts.retry_backoff >= facts.time_left => Decision::OutOfTime,
        d if d.retries(facts) && !facts.retry_budget => Decision::OutOfBudget,
        d => d,
    }
}

/// The decision the outcome calls for, before the request's limits.
fn intent(o: &OutcomeFacts, facts: &Facts, s: &Settings) -> Decision {
    let outcome = &o.outcome;
    if o.success {
        return Decision::Done;
    }
    if matches!(
        outcome,
        Outcome::ClientGone | Outcome::DeadlineExceeded | Outcome::LocalAdapter(_)
    ) {
        return Decision::Return;
    }
    if facts.attempts_left == 0 || facts.affinity_skip_retry {
        return Decision::Return;
    }
    if facts.is_task {
        return task(outcome, o.status, facts, s.retry);
    }
    if !replayable(facts.family, facts.has_idempotency_key, outcome) {
        if facts.family == PathFamily::Images && s.images.enabled {
            return images(outcome, facts, s.images);
        }
        return Decision::Return;
    }
    match outcome {
        Outcome::ChannelError(_) => Decision::FailOver {
            key_fault: o.key_fault,
        },
        Outcome::Transport(kind) => move_or_repeat(facts, s.retry, false, !kind.is_timeout()),
        Outcome::Status { code, .. } => status(*code, o.key_fault, facts, s),
        _ => Decision::Return,
    }
}

/// An HTTP status (after mapping): fail over when `failover_on` says so, else return it —
/// or repeat it on the same target when it is alone and `retry_on` allows (R4.4, R4.5).
fn status(code: u16, key_fault: bool, facts: &Facts, s: &Settings) -> Decision {
    let can_repeat = s.retry.retry_on.contains(code);
    if !(100..=599).contains(&code) {
        return move_or_repeat(facts, s.retry, false, true);
    }
    let fail_over =
        s.routing.failover_on.contains(code) && !s.routing.never_failover_on.contains(code);
    if fail_over {
        move_or_repeat(facts, s.retry, key_fault, can_repeat)
    } else {
        // R4.5: same-target retries come only once alternatives are used up; a code
        // that never fails over (504, 524) is therefore repeated only when alone.
        repeat_or_return(
            facts,
            s.retry.max_retries,
            can_repeat && !facts.alternatives_left,
        )
    }
}

/// Fail over while a target remains; else repeat on the same target if allowed.
fn move_or_repeat(facts: &Facts, retry: &Retry, key_fault: bool, can_repeat: bool) -> Decision {
    if facts.alternatives_left {
        Decision::FailOver { key_fault }
    } else {
        repeat_or_return(facts, retry.max_retries, can_repeat)
    }
}

fn repeat_or_return(facts: &Facts, budget: u32, can_repeat: bool) -> Decision {
    if can_repeat && facts.same_target_retries < budget {
        Decision::RetrySame {
            attempt: facts.same_target_retries + 1,
        }
    } else {
        Decision::Return
    }
}

/// Tier 1 of R10.3: pre-generation rejections.
const IMAGE_TIER1: &[u16] = &[429, 503, 529, 530, 400, 401, 403, 404, 405, 413, 415, 422];

/// Image replay tier of an outcome: 1 = pre-generation rejection, 2 = ambiguous
/// (other 5xx), 3 = uncertain (504, timeouts, broken, empty 2xx); None = never.
pub fn image_tier(outcome: &Outcome) -> Option<u8> {
    match outcome {
        Outcome::Status { code, .. } if IMAGE_TIER1.contains(code) => Some(1),
        Outcome::Status { code: 504, .. } => Some(3),
        Outcome::Status { code, .. } if (500..=599).contains(code) => Some(2),
        Outcome::Transport(k) if k.is_pre_send() => Some(1),
        Outcome::Transport(_) => Some(3),
        _ => None,
    }
}

fn images(outcome: &Outcome, facts: &Facts, cfg: &ImagesFailover) -> Decision {
    let tier = image_tier(outcome);
    let allowed = match tier {
        Some(1) => true,
        Some(2) => cfg.include_ambiguous || cfg.include_uncertain,
        Some(3) => cfg.include_uncertain,
        _ => false,
    };
    if !allowed {
        return Decision::Return;
    }
    if facts.alternatives_left {
        return Decision::FailOver { key_fault: true };
    }
    // Seed 001: tier 2 opens the same-key budget only for the ambiguous 5xx; the
    // 503/529/530 rejections still move on rather than hit the same key again.
    let same_key_ok = cfg.include_uncertain || (cfg.include_ambiguous && tier == Some(2));
    repeat_or_return(facts, cfg.key_retry_budget, same_key_ok)
}

/// Task relay (R10.5): 429/307 retry, 5xx except 504/524 retry,
/// 400/408 never, local errors never, everything else retries. A gateway-side
/// timeout is the local form of a 504 (the task may exist upstream): never.
/// On a follow-up the plan holds only the locked channel, so "retry" stays on it.
fn task(outcome: &Outcome, code: Option<u16>, facts: &Facts, retry: &Retry) -> Decision {
    let never = matches!(outcome, Outcome::SkipRetry(_))
        || matches!(outcome, Outcome::Transport(k) if k.is_timeout())
        || matches!(code, Some(400 | 408 | 504 | 524));
    if never {
        return Decision::Return;
    }
    move_or_repeat(facts, retry, is_key_fault(outcome), true)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "safety_tests.rs"]
mod safety_tests;

#[cfg(test)]
#[path = "policy_limits_tests.rs"]
mod limits_tests;
