//! The one pure outcome classifier (R4.4, R4.5, R10.1, R10.3, R10.5; seed 000 §5, §6, §11).
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
//!   alternatives remain (seed 000 §6); when the target is the only one, it is
//!   retried on the same target if it is in `retry_on` (seed 004: 524 retries
//!   model1 on a single target). SPEC R4.5 decides between the seeds: same-target
//!   retries happen only once every candidate has been tried.
//! - Transport errors count as in `retry_on`, except the timeouts (header,
//!   first byte, body): seed 004 says a local client timeout returns at once,
//!   so a timeout fails over to another target but never repeats on the
//!   same one.
//! - Images (R10.3): connect/DNS/TLS failures never reached the upstream, so
//!   they count as pre-generation rejections (tier 1). A replay always moves
//!   to the next key first (`key_fault: true`). With no target left, the
//!   per-key budget `key_retry_budget` allows same-key replays: for every
//!   replayable failure under `include_uncertain`, only for the ambiguous 5xx
//!   (tier 2, not 503/529/530) under `include_ambiguous`, never in tier 1 (seed 001).
//! - Task relay (R10.5): a configured task path (`tasks.paths`) follows the
//!   seed 000 §11 task rule *instead of* the R10.1 family matrix — the operator
//!   declares by listing the path that a submission is accepted or rejected as a
//!   whole (a task id comes back), so a rejected submit is safe to replay.
//!   Gateway-side timeouts count as 504 (never replayed). Follow-ups are task
//!   calls too; their plan holds only the locked channel.

use std::collections::BTreeMap;

use super::family::{retryable, PathFamily};
use crate::config::model::{ImagesFailover, Retry, Routing};

/// Why an attempt failed before any HTTP status was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Connect,
    Dns,
    Tls,
    Reset,
    HeaderTimeout,
    FirstByteTimeout,
    /// Non-stream body read timeout.
    BodyTimeout,
    /// The connection broke mid-response.
    Broken,
    /// A 2xx with an empty body.
    EmptyBody,
}

impl TransportKind {
    fn is_timeout(self) -> bool {
        matches!(
            self,
            Self::HeaderTimeout | Self::FirstByteTimeout | Self::BodyTimeout
        )
    }

    fn is_pre_send(self) -> bool {
        matches!(self, Self::Connect | Self::Dns | Self::Tls)
    }
}

/// What one upstream attempt produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Status {
        code: u16,
        error_code: Option<String>,
        error_type: Option<String>,
        message: String,
    },
    Transport(TransportKind),
    /// `channel:no_available_key`, ...: always fail over (seed 000 §5).
    ChannelError(String),
    /// Unreadable body, billing failure, content policy, internal: return at once.
    SkipRetry(String),
    /// The client disconnected: stop.
    ClientGone,
    /// Gateway-side adapter error: never replayed.
    LocalAdapter(String),
    /// The whole-request deadline passed: stop.
    DeadlineExceeded,
}

/// Request facts the decision depends on.
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
}

/// Configuration the decision depends on (the current channel's effective values).
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    pub routing: &'a Routing,
    pub retry: &'a Retry,
    pub images: &'a ImagesFailover,
    pub status_code_mapping: &'a BTreeMap<u16, u16>,
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
}

/// Error codes/types that blame the key rather than the channel (seed 000 §10).
const KEY_FAULT_MARKERS: &[&str] = &[
    "insufficient_quota",
    "invalid_api_key",
    "account_deactivated",
    "billing_not_active",
    "arrearage",
    "authentication_error",
    "permission_error",
    "rate_limit_exceeded",
    "quota_exceeded",
];

/// Apply a channel's `status_code_mapping` (R4.4, seed 003 §3.1).
pub fn map_status(code: u16, mapping: &BTreeMap<u16, u16>) -> u16 {
    mapping.get(&code).copied().unwrap_or(code)
}

/// Is this failure the key's fault (401, 403, 429, quota/credential errors)? (R4.3)
pub fn is_key_fault(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Status {
            code,
            error_code,
            error_type,
            ..
        } => {
            matches!(code, 401 | 403 | 429)
                || [error_code, error_type]
                    .into_iter()
                    .flatten()
                    .any(|s| KEY_FAULT_MARKERS.iter().any(|m| s.eq_ignore_ascii_case(m)))
        }
        Outcome::ChannelError(code) => code == "channel:invalid_key",
        _ => false,
    }
}

/// Classify one attempt's outcome. Pure: same inputs, same decision.
pub fn classify(outcome: &Outcome, facts: &Facts, s: &Settings) -> Decision {
    let mapped;
    let outcome = match outcome {
        Outcome::Status {
            code,
            error_code,
            error_type,
            message,
        } => {
            mapped = Outcome::Status {
                code: map_status(*code, s.status_code_mapping),
                error_code: error_code.clone(),
                error_type: error_type.clone(),
                message: message.clone(),
            };
            &mapped
        }
        other => other,
    };
    let code = match outcome {
        Outcome::Status { code, .. } => Some(*code),
        _ => None,
    };
    match outcome {
        Outcome::Success => return Decision::Done,
        Outcome::Status { code, .. } if (200..300).contains(code) => return Decision::Done,
        Outcome::ClientGone | Outcome::DeadlineExceeded | Outcome::LocalAdapter(_) => {
            return Decision::Return
        }
        _ => {}
    }
    if facts.attempts_left == 0 || facts.affinity_skip_retry {
        return Decision::Return;
    }
    if facts.is_task {
        return task(outcome, code, facts, s.retry);
    }
    if !retryable(facts.family, facts.has_idempotency_key) {
        if facts.family == PathFamily::Images && s.images.enabled {
            return images(outcome, facts, s.images);
        }
        return Decision::Return;
    }
    let key_fault = is_key_fault(outcome);
    match outcome {
        Outcome::ChannelError(_) => Decision::FailOver { key_fault },
        Outcome::SkipRetry(_) => Decision::Return,
        Outcome::Transport(kind) => move_or_repeat(facts, s.retry, false, !kind.is_timeout()),
        Outcome::Status { code, .. } => {
            let code = *code;
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
        // Handled above.
        Outcome::Success
        | Outcome::ClientGone
        | Outcome::LocalAdapter(_)
        | Outcome::DeadlineExceeded => Decision::Return,
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

/// R10.4: did this attempt end with an unknown outcome after the request was sent
/// (timeout, broken or reset connection, empty 2xx, deadline while waiting) on a
/// path that bills an artifact? An `Idempotency-Key` does not clear the mark: it
/// makes a replay safe, not this attempt's charge known.
pub fn possibly_charged(outcome: &Outcome, family: PathFamily) -> bool {
    let unknown = match outcome {
        Outcome::Transport(k) => !k.is_pre_send(),
        Outcome::DeadlineExceeded => true,
        _ => false,
    };
    unknown && !retryable(family, false)
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

/// Task relay (R10.5, seed 000 §11): 429/307 retry, 5xx except 504/524 retry,
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
