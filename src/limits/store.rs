//! The backing-store seam (R15, R17): what a store answers atomically for one subject,
//! so the same `Limiter` runs on local state or on a shared store (see the `limits` docs
//! for the Redis shape).

use std::future::Future;

use tokio::time::Instant;

use super::refusal::{Refusal, Report, Room};
use super::subject::Subject;

/// One request's question to a store: the subject's limits (0 = unlimited) and its cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ask {
    pub rpm: u64,
    pub rpd: u64,
    pub tpm: u64,
    pub concurrency: u32,
    /// The token reservation (prompt estimate + `max_tokens`); counted only under `tpm`.
    pub tokens: u64,
}

impl Ask {
    /// No limit set: nothing to check, no state to keep.
    pub fn is_unlimited(&self) -> bool {
        self.rpm == 0 && self.rpd == 0 && self.tpm == 0 && self.concurrency == 0
    }

    /// The counted kinds' limits and costs, in `Kind` order (`rpm`, `rpd`, `tpm`).
    pub(crate) fn counted(&self) -> [(u64, u64); 3] {
        [(self.rpm, 1), (self.rpd, 1), (self.tpm, self.tokens)]
    }
}

/// A non-mutating look: is there room, and the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peek {
    pub room: Room,
    pub report: Report,
}

/// What a store gives an admitted request. Dropping it unsettled releases its concurrency
/// permit and keeps its token reservation as the charge (its real usage is unknown).
pub trait Grant: Send + Sync + 'static {
    /// The numbers after this admission (for success headers and the admin view).
    fn report(&self) -> &Report;

    /// The request ended having used `actual_tokens` (input + output; for a cut stream, what
    /// it used so far): the unused reservation goes back, an overrun is taken. Releases the
    /// permit.
    fn settle(self, actual_tokens: u64, now: Instant);

    /// The request never reached an upstream: its request count and reservation go back.
    /// Releases the permit.
    fn cancel(self, now: Instant);
}

/// Where limit state lives. `admit` is the one atomic all-or-nothing transition: every
/// configured kind fits and is taken, or nothing changes and the refusal says why.
pub trait Store: Send + Sync + 'static {
    type Grant: Grant;

    /// Check and take every kind of `ask` for `subject` at `now`. A local store answers
    /// synchronously (a ready future); a shared one makes one round trip.
    fn admit(
        &self,
        subject: Subject<'_>,
        ask: &Ask,
        now: Instant,
    ) -> impl Future<Output = Result<Self::Grant, Refusal>> + Send;

    /// Room and numbers without taking anything (planning, admin views). Never a round trip:
    /// a shared store answers from its local mirror.
    fn peek(&self, subject: Subject<'_>, ask: &Ask, now: Instant) -> Peek;

    /// Drop state that no longer counts anything and that nothing holds; returns how many
    /// subjects were dropped.
    fn sweep(&self, now: Instant) -> usize;
}
