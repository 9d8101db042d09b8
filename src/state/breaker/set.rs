//! A channel's breakers (R6.1, R6.3): the provider breaker and the bounded model-scoped ones,
//! and — with shared state (R17.1) — the deployment-wide half-open probe lease.
//!
//! Shared mode: a breaker that opens here is announced ([`Change::BreakerOpened`]); one that
//! another replica opened is applied with [`Breakers::apply_open`]. When an open breaker's
//! timeout has passed, the next admission would be the probe; with shared state that probe
//! needs the deployment's one probe lease, so without it the breaker refuses (fails over
//! like any open breaker) and asks for the lease ([`Change::ProbeWanted`], at most every
//! [`LEASE_ASK_EVERY`]). The runtime grants or denies it ([`Breakers::grant_lease`],
//! [`Breakers::deny_lease`]); the holder probes until the breaker closes or re-opens, and
//! its runtime renews the lease ([`PROBE_LEASE`], 1 s) every tick meanwhile
//! ([`Breakers::leases_held`]), so the slot of a holder that died is free within a second.
//! A replica with requests for an open breaker asks for the lease shortly before the
//! timeout ends ([`Breakers::leases_to_ask`]), so its first request after it is the probe.
//!
//! Failures are counted by the deployment (B-shared-failure-counts): while Redis answers, a
//! closed breaker's failure is announced ([`Change::BreakerFailed`]) and added to the shared
//! count, which every replica applies ([`Breakers::apply_failures`]); the failure that brings
//! it to the threshold opens the breaker everywhere. The local count runs as without shared
//! state, so a replica cut off from Redis still opens on its own failures.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::{Admission, Core, Limits, State, Transition, Verdict, MODEL_CAP, MODEL_IDLE};
use crate::state::sync::{Change, Sink};

/// A replica without the probe lease asks again at most this often.
pub const LEASE_ASK_EVERY: Duration = Duration::from_millis(500);

use crate::lock::lock;

struct Shared {
    channel: String,
    sink: Arc<dyn Sink>,
}

impl Shared {
    /// What one recorded visit tells the other replicas: an opening, a closing, or (while
    /// Redis answers) a closed breaker's failure (`count: Some(true)`) or the success that
    /// ends a run of them (`Some(false)`).
    fn announce(
        &self,
        lim: &Limits,
        scope: Scope,
        opened: bool,
        t: Option<Transition>,
        count: Option<bool>,
    ) {
        let scope = || scope.map(str::to_string);
        let channel = || self.channel.clone();
        let change = if opened {
            Change::BreakerOpened {
                channel: channel(),
                scope: scope(),
                timeout: lim.timeout,
            }
        } else if t.is_some_and(|t| t.to == State::Closed) {
            Change::BreakerClosed {
                channel: channel(),
                scope: scope(),
            }
        } else if !self.sink.is_live() {
            return;
        } else {
            match count {
                Some(true) => Change::BreakerFailed {
                    channel: channel(),
                    scope: scope(),
                    threshold: lim.failure_threshold,
                    timeout: lim.timeout,
                },
                Some(false) => Change::BreakerSucceeded {
                    channel: channel(),
                    scope: scope(),
                },
                None => return,
            }
        };
        self.sink.emit(change);
    }
}

/// A channel's breakers: one provider breaker and the model-scoped ones (R6.1, R6.3).
pub struct Breakers {
    provider: Mutex<Core>,
    models: Mutex<HashMap<String, Core>>,
    shared: OnceLock<Shared>,
}

impl std::fmt::Debug for Breakers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breakers")
            .field("provider", &self.provider)
            .field("models", &lock(&self.models).len())
            .field("shared", &self.shared.get().is_some())
            .finish()
    }
}

impl Default for Breakers {
    fn default() -> Self {
        Breakers {
            provider: Mutex::new(Core::new(Instant::now())),
            models: Mutex::new(HashMap::new()),
            shared: OnceLock::new(),
        }
    }
}

/// Which breaker of a channel a call uses: `None` = the provider breaker.
pub type Scope<'a> = Option<&'a str>;

/// How long a granted probe lease lasts without renewal (B-shared-probe-lease): its holder's
/// runtime renews it every tick while the probe runs, so a holder that died frees the probe
/// slot within a second — not after the breaker's whole timeout.
pub const PROBE_LEASE: Duration = Duration::from_secs(1);

impl Breakers {
    /// Share this channel's breakers through `sink` (shared state is on).
    pub fn share(&self, channel: &str, sink: Arc<dyn Sink>) {
        let _ = self.shared.set(Shared {
            channel: channel.to_string(),
            sink,
        });
    }

    /// With shared state, may this replica send the probe now? Without the lease: no, and
    /// ask for it (rate-limited). Always yes when state is not shared or no probe is next.
    fn gate(&self, c: &mut Core, lim: &Limits, scope: Scope, now: Instant) -> bool {
        let Some(sh) = self.shared.get() else {
            return true;
        };
        if lim.failure_threshold == 0 || !c.probe_next(lim, now) || !sh.sink.is_live() {
            return true;
        }
        if c.lease_until.is_some_and(|t| t > now) {
            return true;
        }
        if c.ask_after.is_none_or(|t| now >= t) {
            c.ask_after = Some(now + LEASE_ASK_EVERY);
            sh.sink.emit(Change::ProbeWanted {
                channel: sh.channel.clone(),
                scope: scope.map(str::to_string),
                ttl: PROBE_LEASE,
            });
        }
        false
    }

    /// Plan-time check (changes nothing but, with shared state, may ask for the lease).
    pub fn would_admit(&self, lim: &Limits, scope: Scope, now: Instant) -> bool {
        let check = |c: &mut Core| c.would_admit(lim, now) && self.gate(c, lim, scope, now);
        match scope {
            None => check(&mut lock(&self.provider)),
            Some(m) => lock(&self.models).get_mut(m).is_none_or(check),
        }
    }

    pub fn acquire(
        &self,
        lim: &Limits,
        scope: Scope,
        now: Instant,
    ) -> (Admission, Option<Transition>) {
        let take = |c: &mut Core| {
            if !self.gate(c, lim, scope, now) {
                c.last_used = now;
                return (Admission::Refused, None);
            }
            c.acquire(lim, now)
        };
        match scope {
            None => take(&mut lock(&self.provider)),
            Some(m) => {
                let mut map = lock(&self.models);
                if !map.contains_key(m) && !make_room(&mut map, lim, now) {
                    // Every slot is protected: the new model fast-fails (R6.3).
                    return (Admission::Refused, None);
                }
                take(map.entry(m.to_string()).or_insert_with(|| Core::new(now)))
            }
        }
    }

    /// Record one visit; returns the transition and the breaker's state afterwards. With
    /// shared state an opening or closing is announced, and so is a closed breaker's failure
    /// (or the success that ends a run of them) while Redis answers: the deployment counts
    /// failures together ([`Change::BreakerFailed`]).
    pub fn record(
        &self,
        lim: &Limits,
        scope: Scope,
        verdict: Verdict,
        probe: bool,
        now: Instant,
    ) -> (Option<Transition>, State) {
        let record_in = |c: &mut Core| {
            let before = c.opened_at();
            let counted = c.state(lim, now) == State::Closed && lim.failure_threshold > 0;
            let had = c.consecutive_failures();
            let transition = c.record(lim, verdict, probe, now);
            let opened = c.state(lim, now) == State::Open && c.opened_at() != before;
            let count = match verdict {
                Verdict::Failure if counted && !opened => Some(true),
                Verdict::Success if counted && had > 0 => Some(false),
                _ => None,
            };
            (transition, c.state(lim, now), opened, count)
        };
        let (transition, state, opened, count) = match scope {
            None => record_in(&mut lock(&self.provider)),
            Some(m) => match lock(&self.models).get_mut(m) {
                Some(c) => record_in(c),
                None => (None, State::Closed, false, None),
            },
        };
        if let Some(sh) = self.shared.get() {
            sh.announce(lim, scope, opened, transition, count);
        }
        (transition, state)
    }

    /// Apply `f` to the breaker of `scope`, creating a model breaker when there is room.
    fn with_core<R>(
        &self,
        lim: &Limits,
        scope: Scope,
        now: Instant,
        f: impl FnOnce(&mut Core) -> R,
    ) -> Option<R> {
        match scope {
            None => Some(f(&mut lock(&self.provider))),
            Some(m) => {
                let mut map = lock(&self.models);
                if !map.contains_key(m) && !make_room(&mut map, lim, now) {
                    return None;
                }
                Some(f(map
                    .entry(m.to_string())
                    .or_insert_with(|| Core::new(now))))
            }
        }
    }

    /// Another replica opened the breaker of `scope`; `remaining` of its timeout is left.
    pub fn apply_open(&self, lim: &Limits, scope: Scope, remaining: Duration, now: Instant) {
        self.with_core(lim, scope, now, |c| c.force_open(lim, remaining, now));
    }

    /// The deployment's count of consecutive failures of the closed breaker of `scope`
    /// (`0`: a success ended the run). A count at the threshold (the failure that reached
    /// it in Redis opened the breaker there) opens it here; returns whether it did.
    pub fn apply_failures(&self, lim: &Limits, scope: Scope, n: u32, now: Instant) -> bool {
        self.with_core(lim, scope, now, |c| c.apply_failures(lim, n, now))
            .unwrap_or(false)
    }

    /// Another replica closed the breaker of `scope`.
    pub fn apply_closed(&self, scope: Scope) {
        match scope {
            None => lock(&self.provider).force_close(),
            Some(m) => {
                if let Some(c) = lock(&self.models).get_mut(m) {
                    c.force_close();
                }
            }
        }
    }

    /// An active probe of `scope` succeeded (R19.2): the breaker closes at once, announced
    /// to the other replicas when state is shared. The transition, when it was not closed.
    pub fn close(&self, scope: Scope) -> Option<Transition> {
        let transition = match scope {
            None => lock(&self.provider).close(),
            Some(m) => lock(&self.models).get_mut(m).and_then(Core::close),
        };
        if let (Some(_), Some(sh)) = (transition, self.shared.get()) {
            sh.sink.emit(Change::BreakerClosed {
                channel: sh.channel.clone(),
                scope: scope.map(str::to_string),
            });
        }
        transition
    }

    /// This replica holds the probe lease of `scope` until `until`.
    pub fn grant_lease(&self, scope: Scope, until: Instant) {
        self.set_lease(scope, |c| {
            c.lease_until = Some(until);
            c.ask_after = None;
        });
    }

    /// The scopes whose probe lease this replica holds now with its probe out: its runtime
    /// renews them. A lease whose holder sends no probe (no traffic) is not renewed and
    /// lapses within [`PROBE_LEASE`], so a replica with traffic can take it.
    pub fn leases_held(&self, lim: &Limits, now: Instant) -> Vec<Option<String>> {
        let held = |c: &Core| c.lease_until.is_some_and(|t| t > now) && c.probe_in_flight(lim, now);
        let mut leased = Vec::new();
        if held(&lock(&self.provider)) {
            leased.push(None);
        }
        for (m, c) in lock(&self.models).iter() {
            if held(c) {
                leased.push(Some(m.clone()));
            }
        }
        leased
    }

    /// The scopes whose open breaker lets its probe through within `ahead`, that saw a
    /// request since they opened, and hold no lease nor a pending denial: the runtime asks
    /// for their lease ahead of the timeout's end, so the first request after it is the
    /// probe instead of failing over while the lease is asked for (B-shared-probe-lease).
    pub fn leases_to_ask(
        &self,
        lim: &Limits,
        now: Instant,
        ahead: Duration,
    ) -> Vec<Option<String>> {
        if lim.failure_threshold == 0 || self.shared.get().is_none() {
            return Vec::new();
        }
        let due = |c: &mut Core| {
            let ask = c.open_remaining(lim, now).is_some_and(|left| left <= ahead)
                && c.opened_at().is_some_and(|t| c.last_used > t)
                && c.lease_until.is_none_or(|t| t <= now)
                && c.ask_after.is_none_or(|t| now >= t);
            if ask {
                c.ask_after = Some(now + LEASE_ASK_EVERY);
            }
            ask
        };
        let mut due_scopes = Vec::new();
        if due(&mut lock(&self.provider)) {
            due_scopes.push(None);
        }
        for (m, c) in lock(&self.models).iter_mut() {
            if due(c) {
                due_scopes.push(Some(m.clone()));
            }
        }
        due_scopes
    }

    /// Another replica holds the probe lease of `scope`; ask again at `retry_at`.
    pub fn deny_lease(&self, scope: Scope, retry_at: Instant) {
        self.set_lease(scope, |c| {
            c.lease_until = None;
            c.ask_after = Some(retry_at);
        });
    }

    fn set_lease(&self, scope: Scope, f: impl FnOnce(&mut Core)) {
        match scope {
            None => f(&mut lock(&self.provider)),
            Some(m) => {
                if let Some(c) = lock(&self.models).get_mut(m) {
                    f(c);
                }
            }
        }
    }

    /// Breakers open now with the time left of their timeout (`None` = the provider).
    pub fn open_now(&self, lim: &Limits, now: Instant) -> Vec<(Option<String>, Duration)> {
        let left = |c: &Core| match c.state(lim, now) {
            State::Open => c.open_remaining(lim, now),
            _ => None,
        };
        let mut remaining: Vec<_> = left(&lock(&self.provider))
            .map(|d| (None, d))
            .into_iter()
            .collect();
        for (m, c) in lock(&self.models).iter() {
            if let Some(d) = left(c) {
                remaining.push((Some(m.clone()), d));
            }
        }
        remaining
    }

    /// Provider breaker snapshot.
    pub fn provider(&self) -> Core {
        lock(&self.provider).clone()
    }

    /// Model breakers that are not closed, by model name.
    pub fn models_not_closed(&self, lim: &Limits, now: Instant) -> Vec<(String, State)> {
        let mut not_closed: Vec<_> = lock(&self.models)
            .iter()
            .map(|(m, c)| (m.clone(), c.state(lim, now)))
            .filter(|(_, s)| *s != State::Closed)
            .collect();
        not_closed.sort_by(|a, b| a.0.cmp(&b.0));
        not_closed
    }

    #[cfg(test)]
    pub(crate) fn model_names(&self) -> Vec<String> {
        lock(&self.models).keys().cloned().collect()
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
