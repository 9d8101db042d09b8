//! The circuit breaker state machine (R6.1–R6.3): Closed → Open → HalfOpen.
//!
//! One mechanism serves two presets (R6.4): the channel breaker (`resilience.circuit_breaker`)
//! and the route cooldown (`resilience.cooldown`, see `cooldown.rs`). Thresholds are passed
//! in at every call from the channel's *current* effective config, never stored, so a reload
//! that changes them keeps the counters (R2.5). Time is `tokio::time::Instant`.
//!
//! `set.rs` holds a channel's breakers (the channel one and the model-scoped ones) with the
//! deployment-wide half-open probe lease and the shared failure count (R17.1).

pub mod set;

use std::time::Duration;

use tokio::time::Instant;

use crate::config::model::Breaker as BreakerCfg;

pub use set::{Breakers, Scope};

/// At most this many model-scoped breakers per channel (R6.3).
pub const MODEL_CAP: usize = 1024;
/// Closed model-scoped breakers unused this long may be dropped (R6.3).
pub const MODEL_IDLE: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Closed,
    HalfOpen,
    Open,
}

impl State {
    /// Gauge value of R6.5: 0 closed, 1 half-open, 2 open.
    pub fn gauge(self) -> f64 {
        match self {
            State::Closed => 0.0,
            State::HalfOpen => 1.0,
            State::Open => 2.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::HalfOpen => "half_open",
            State::Open => "open",
        }
    }
}

/// The thresholds in force for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// 0 = the breaker is off (always admits, records nothing).
    pub failure_threshold: u32,
    pub success_threshold: u32,
    pub timeout: Duration,
}

impl Limits {
    pub fn of(cfg: &BreakerCfg) -> Limits {
        Limits {
            failure_threshold: if cfg.enabled {
                cfg.failure_threshold
            } else {
                0
            },
            success_threshold: cfg.success_threshold.max(1),
            timeout: cfg.timeout,
        }
    }

    fn off(&self) -> bool {
        self.failure_threshold == 0
    }
}

/// How one finished target visit counts for a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Success,
    Failure,
    /// Counts neither way (caller-caused 4xx, client cancel, statuses outside `failure_on`);
    /// only releases a held probe slot.
    Neutral,
}

/// Whether an attempt may go upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Normal traffic (closed breaker, or breaker off).
    Admitted,
    /// The one half-open probe: its result decides the breaker (R6.1).
    Probe,
    /// Fast-fail with the breaker 503.
    Refused,
}

impl Admission {
    pub fn admitted(self) -> bool {
        self != Admission::Refused
    }
}

/// One state transition, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: State,
    pub to: State,
}

#[derive(Debug, Clone)]
pub struct Core {
    state: State,
    failures: u32,
    successes: u32,
    opened_at: Option<Instant>,
    /// When the current half-open probe was handed out (a probe whose result never comes
    /// back — the request was dropped — frees its slot after `timeout`).
    probe_at: Option<Instant>,
    /// With shared state: this replica holds the deployment's probe lease until then.
    pub(crate) lease_until: Option<Instant>,
    /// With shared state: do not ask for the probe lease again before then.
    pub(crate) ask_after: Option<Instant>,
    pub last_used: Instant,
}

impl Core {
    pub fn new(now: Instant) -> Core {
        Core {
            state: State::Closed,
            failures: 0,
            successes: 0,
            opened_at: None,
            probe_at: None,
            lease_until: None,
            ask_after: None,
            last_used: now,
        }
    }

    /// The state as seen at `now` (Open past its timeout reads as HalfOpen).
    pub fn state(&self, lim: &Limits, now: Instant) -> State {
        match self.state {
            State::Open if self.timed_out(lim, now) => State::HalfOpen,
            s => s,
        }
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// Time left until an open breaker lets a probe through.
    pub fn open_remaining(&self, lim: &Limits, now: Instant) -> Option<Duration> {
        match (self.state, self.opened_at) {
            (State::Open, Some(t)) => {
                let end = t + lim.timeout;
                (end > now).then(|| end - now)
            }
            _ => None,
        }
    }

    fn timed_out(&self, lim: &Limits, now: Instant) -> bool {
        self.opened_at.is_none_or(|t| now >= t + lim.timeout)
    }

    fn probe_busy(&self, lim: &Limits, now: Instant) -> bool {
        self.probe_at.is_some_and(|t| now < t + lim.timeout)
    }

    /// A half-open probe is out and its result has not come back (nor timed out).
    pub(crate) fn probe_in_flight(&self, lim: &Limits, now: Instant) -> bool {
        self.probe_busy(lim, now)
    }

    /// Would an attempt be admitted now? Does not change anything (plan-time check).
    pub fn would_admit(&self, lim: &Limits, now: Instant) -> bool {
        if lim.off() {
            return true;
        }
        match self.state {
            State::Closed => true,
            State::Open => self.timed_out(lim, now) && !self.probe_busy(lim, now),
            State::HalfOpen => !self.probe_busy(lim, now),
        }
    }

    /// Take admission for one attempt; in half-open only one probe at a time is admitted.
    pub fn acquire(&mut self, lim: &Limits, now: Instant) -> (Admission, Option<Transition>) {
        self.last_used = now;
        if lim.off() {
            return (Admission::Admitted, None);
        }
        match self.state {
            State::Closed => (Admission::Admitted, None),
            State::Open if !self.timed_out(lim, now) => (Admission::Refused, None),
            State::Open | State::HalfOpen => {
                if self.probe_busy(lim, now) {
                    return (Admission::Refused, None);
                }
                let transition = self.move_to(State::HalfOpen);
                self.probe_at = Some(now);
                (Admission::Probe, transition)
            }
        }
    }

    /// Record the result of one target visit. `probe` says whether it held the probe slot.
    pub fn record(
        &mut self,
        lim: &Limits,
        v: Verdict,
        probe: bool,
        now: Instant,
    ) -> Option<Transition> {
        self.last_used = now;
        if probe {
            self.probe_at = None;
        }
        if lim.off() {
            return None;
        }
        match (self.state, v) {
            (_, Verdict::Neutral) => None,
            (State::Closed, Verdict::Success) => {
                self.failures = 0;
                None
            }
            (State::Closed, Verdict::Failure) => {
                self.failures = self.failures.saturating_add(1);
                if self.failures >= lim.failure_threshold {
                    self.open(now)
                } else {
                    None
                }
            }
            // Results of calls admitted before the breaker opened do not count; only the
            // probe (or, for the cooldown preset, the first result after the timeout) does.
            (State::Open, _) if !probe && !self.timed_out(lim, now) => None,
            (State::Open | State::HalfOpen, Verdict::Failure) => self.open(now),
            (State::Open | State::HalfOpen, Verdict::Success) => {
                let mut transition = None;
                if self.state == State::Open {
                    transition = self.move_to(State::HalfOpen);
                }
                self.successes += 1;
                if self.successes >= lim.success_threshold {
                    self.failures = 0;
                    transition = self.move_to(State::Closed).or(transition);
                }
                transition
            }
        }
    }

    /// The next admission would be the half-open probe.
    pub(crate) fn probe_next(&self, lim: &Limits, now: Instant) -> bool {
        match self.state {
            State::Closed => false,
            State::Open => self.timed_out(lim, now),
            State::HalfOpen => true,
        }
    }

    /// Another replica opened this breaker with `remaining` of its timeout left.
    pub(crate) fn force_open(&mut self, lim: &Limits, remaining: Duration, now: Instant) {
        let back = lim.timeout.saturating_sub(remaining);
        self.opened_at = Some(now.checked_sub(back).unwrap_or(now));
        self.state = State::Open;
        self.successes = 0;
        self.probe_at = None;
        self.lease_until = None;
        self.ask_after = None;
    }

    /// The deployment's count of this closed breaker's consecutive failures: the larger
    /// of it and the local count is kept (`0` resets). A shared count at the threshold
    /// opens the breaker; returns whether it did.
    pub(crate) fn apply_failures(&mut self, lim: &Limits, n: u32, now: Instant) -> bool {
        if lim.off() || self.state != State::Closed {
            return false;
        }
        self.failures = if n == 0 { 0 } else { self.failures.max(n) };
        n >= lim.failure_threshold && self.open(now).is_some()
    }

    /// Another replica closed this breaker.
    pub(crate) fn force_close(&mut self) {
        let _ = self.close();
    }

    /// Closed at once (another replica's close, or an active probe's success, R19.2).
    pub(crate) fn close(&mut self) -> Option<Transition> {
        self.failures = 0;
        self.move_to(State::Closed)
    }

    /// Opened (or re-opened) at `now`.
    pub(crate) fn opened_at(&self) -> Option<Instant> {
        self.opened_at
    }

    fn open(&mut self, now: Instant) -> Option<Transition> {
        self.opened_at = Some(now);
        self.successes = 0;
        self.probe_at = None;
        self.lease_until = None;
        self.ask_after = None;
        match self.state {
            State::Open => None,
            _ => self.move_to(State::Open),
        }
    }

    fn move_to(&mut self, to: State) -> Option<Transition> {
        let from = self.state;
        if from == to {
            return None;
        }
        self.state = to;
        if to == State::Closed {
            self.successes = 0;
            self.opened_at = None;
            self.probe_at = None;
            self.lease_until = None;
            self.ask_after = None;
        }
        Some(Transition { from, to })
    }
}

#[cfg(test)]
mod tests;
