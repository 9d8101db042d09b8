//! The circuit breaker state machine (R6.1–R6.3, seed 004): Closed → Open → HalfOpen.
//!
//! One mechanism serves two presets (R6.4): the channel breaker (`resilience.circuit_breaker`)
//! and the route cooldown (`resilience.cooldown`, see `cooldown.rs`). Thresholds are passed
//! in at every call from the channel's *current* effective config, never stored, so a reload
//! that changes them keeps the counters (R2.5). Time is `tokio::time::Instant`.

use crate::sync::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::model::Breaker as BreakerCfg;

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
                let t = self.move_to(State::HalfOpen);
                self.probe_at = Some(now);
                (Admission::Probe, t)
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
                let mut t = None;
                if self.state == State::Open {
                    t = self.move_to(State::HalfOpen);
                }
                self.successes += 1;
                if self.successes >= lim.success_threshold {
                    self.failures = 0;
                    t = self.move_to(State::Closed).or(t);
                }
                t
            }
        }
    }

    fn open(&mut self, now: Instant) -> Option<Transition> {
        self.opened_at = Some(now);
        self.successes = 0;
        self.probe_at = None;
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
        }
        Some(Transition { from, to })
    }
}

/// A channel's breakers: one provider breaker and the model-scoped ones (R6.1, R6.3).
#[derive(Debug)]
pub struct Breakers {
    provider: Mutex<Core>,
    models: Mutex<HashMap<String, Core>>,
}

impl Default for Breakers {
    fn default() -> Self {
        Breakers {
            provider: Mutex::new(Core::new(Instant::now())),
            models: Mutex::new(HashMap::new()),
        }
    }
}

/// Which breaker of a channel a call uses: `None` = the provider breaker.
pub type Scope<'a> = Option<&'a str>;

impl Breakers {
    /// Plan-time check, non-mutating.
    pub fn would_admit(&self, lim: &Limits, scope: Scope, now: Instant) -> bool {
        match scope {
            None => lock(&self.provider).would_admit(lim, now),
            Some(m) => lock(&self.models)
                .get(m)
                .is_none_or(|c| c.would_admit(lim, now)),
        }
    }

    pub fn acquire(
        &self,
        lim: &Limits,
        scope: Scope,
        now: Instant,
    ) -> (Admission, Option<Transition>) {
        match scope {
            None => lock(&self.provider).acquire(lim, now),
            Some(m) => {
                let mut map = lock(&self.models);
                if !map.contains_key(m) && !make_room(&mut map, lim, now) {
                    // Every slot is protected: the new model fast-fails (seed 004).
                    return (Admission::Refused, None);
                }
                map.entry(m.to_string())
                    .or_insert_with(|| Core::new(now))
                    .acquire(lim, now)
            }
        }
    }

    /// Record one visit; returns the transition and the breaker's state afterwards.
    pub fn record(
        &self,
        lim: &Limits,
        scope: Scope,
        v: Verdict,
        probe: bool,
        now: Instant,
    ) -> (Option<Transition>, State) {
        let f = |c: &mut Core| (c.record(lim, v, probe, now), c.state(lim, now));
        match scope {
            None => f(&mut lock(&self.provider)),
            Some(m) => match lock(&self.models).get_mut(m) {
                Some(c) => f(c),
                None => (None, State::Closed),
            },
        }
    }

    /// Provider breaker snapshot.
    pub fn provider(&self) -> Core {
        lock(&self.provider).clone()
    }

    /// Model breakers that are not closed, by model name.
    pub fn models_not_closed(&self, lim: &Limits, now: Instant) -> Vec<(String, State)> {
        let mut v: Vec<_> = lock(&self.models)
            .iter()
            .map(|(m, c)| (m.clone(), c.state(lim, now)))
            .filter(|(_, s)| *s != State::Closed)
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    pub fn model_count(&self) -> usize {
        lock(&self.models).len()
    }

    /// Forget everything (operator enable).
    pub fn reset(&self) {
        *lock(&self.provider) = Core::new(Instant::now());
        lock(&self.models).clear();
    }
}

/// Room for one more model breaker. Below the cap nothing is scanned; at the cap, drop the
/// idle closed breakers, and if none is idle the oldest closed one. Returns false when the
/// map is full of protected (open / half-open) breakers.
fn make_room(map: &mut HashMap<String, Core>, lim: &Limits, now: Instant) -> bool {
    if map.len() < MODEL_CAP {
        return true;
    }
    map.retain(|_, c| {
        !(c.state(lim, now) == State::Closed && now.duration_since(c.last_used) >= MODEL_IDLE)
    });
    if map.len() < MODEL_CAP {
        return true;
    }
    let oldest = map
        .iter()
        .filter(|(_, c)| c.state(lim, now) == State::Closed)
        .min_by_key(|(_, c)| c.last_used)
        .map(|(k, _)| k.clone());
    match oldest {
        Some(k) => {
            map.remove(&k);
            true
        }
        None => false,
    }
}

#[cfg(test)]
#[path = "breaker_tests.rs"]
mod tests;
