//! The limiter the request path calls (R15.1, R15.3): a client's limits checked together
//! before the precharge, and each upstream key's limits for planning ("room now?", remaining
//! fraction) and at attempt time ("take"). Generic over the backing [`Store`].

use tokio::time::Instant;

use super::local::{Bounds, Local, LocalGrant};
use super::refusal::{Refusal, Report, Room};
use super::store::{Ask, Grant, Store};
use super::subject::Subject;
use super::{ClientLimits, KeyLimits};

/// Limits over a store (local by default).
#[derive(Debug, Default)]
pub struct Limiter<S: Store = Local> {
    store: S,
}

/// An admitted request (or attempt). Holds its concurrency permit and token reservation
/// until `settle`, `cancel` or drop; dropping it (an error path, a client disconnect, an
/// aborted task) releases the permit and keeps the reservation as the charge.
#[derive(Debug)]
#[must_use = "dropping an admission ends the request's hold on its limits"]
pub struct Admission<G: Grant> {
    /// `None` for a subject with no limits: nothing was taken.
    grant: Option<G>,
}

impl<G: Grant> Admission<G> {
    /// An admission that holds nothing (no limits configured).
    pub fn unlimited() -> Self {
        Admission { grant: None }
    }

    /// The numbers after this admission (empty when unlimited).
    pub fn report(&self) -> Report {
        self.grant.as_ref().map(|g| *g.report()).unwrap_or_default()
    }

    /// The request is over and used `actual_tokens` (input + output); a cut stream passes
    /// what it used so far, so it is never refunded below that.
    pub fn settle(self, actual_tokens: u64, now: Instant) {
        if let Some(g) = self.grant {
            g.settle(actual_tokens, now);
        }
    }

    /// Nothing reached an upstream (e.g. the precharge or the route lookup refused it): the
    /// request count and the reservation go back.
    pub fn cancel(self, now: Instant) {
        if let Some(g) = self.grant {
            g.cancel(now);
        }
    }
}

impl Limiter<Local> {
    /// A limiter on local state.
    pub fn local(bounds: Bounds) -> Self {
        Limiter {
            store: Local::new(bounds),
        }
    }

    /// [`Limiter::admit_client`] without the future: the local path is synchronous.
    pub fn admit_client_now(
        &self,
        client: &str,
        limits: &ClientLimits,
        tokens: u64,
        now: Instant,
    ) -> Result<Admission<LocalGrant>, Refusal> {
        admit_sync(
            &self.store,
            Subject::Client(client),
            &limits.ask(tokens),
            now,
        )
    }

    /// [`Limiter::take_key`] without the future.
    pub fn take_key_now(
        &self,
        channel: &str,
        key: &str,
        limits: &KeyLimits,
        tokens: u64,
        now: Instant,
    ) -> Result<Admission<LocalGrant>, Refusal> {
        let subject = Subject::Key { channel, key };
        admit_sync(&self.store, subject, &limits.ask(tokens), now)
    }
}

fn admit_sync(
    store: &Local,
    subject: Subject<'_>,
    ask: &Ask,
    now: Instant,
) -> Result<Admission<LocalGrant>, Refusal> {
    if ask.is_unlimited() {
        return Ok(Admission::unlimited());
    }
    store
        .admit_now(subject, ask, now)
        .map(|g| Admission { grant: Some(g) })
}

impl<S: Store> Limiter<S> {
    pub fn new(store: S) -> Self {
        Limiter { store }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    async fn admit(
        &self,
        subject: Subject<'_>,
        ask: Ask,
        now: Instant,
    ) -> Result<Admission<S::Grant>, Refusal> {
        if ask.is_unlimited() {
            return Ok(Admission::unlimited());
        }
        let grant = self.store.admit(subject, &ask, now).await?;
        Ok(Admission { grant: Some(grant) })
    }

    /// R15.1: check every limit of `client` together for one request reserving `tokens`
    /// (prompt estimate + `max_tokens`). All or nothing: a refusal changes no counter.
    pub async fn admit_client(
        &self,
        client: &str,
        limits: &ClientLimits,
        tokens: u64,
        now: Instant,
    ) -> Result<Admission<S::Grant>, Refusal> {
        self.admit(Subject::Client(client), limits.ask(tokens), now)
            .await
    }

    /// R15.3: take one attempt's share of an upstream key's limits (at attempt time).
    pub async fn take_key(
        &self,
        channel: &str,
        key: &str,
        limits: &KeyLimits,
        tokens: u64,
        now: Instant,
    ) -> Result<Admission<S::Grant>, Refusal> {
        let subject = Subject::Key { channel, key };
        self.admit(subject, limits.ask(tokens), now).await
    }

    /// R15.3: would an attempt reserving `tokens` fit this key now? Non-mutating (planning).
    pub fn key_room(
        &self,
        channel: &str,
        key: &str,
        limits: &KeyLimits,
        tokens: u64,
        now: Instant,
    ) -> Room {
        if limits.is_unlimited() {
            return Room::Now;
        }
        let subject = Subject::Key { channel, key };
        self.store.peek(subject, &limits.ask(tokens), now).room
    }

    /// The key's tightest remaining budget as a fraction in `[0, 1]` (`routing.balance:
    /// capacity` scales the key's weight by it); 1 when unlimited.
    pub fn key_remaining_fraction(
        &self,
        channel: &str,
        key: &str,
        limits: &KeyLimits,
        now: Instant,
    ) -> f64 {
        if limits.is_unlimited() {
            return 1.0;
        }
        let subject = Subject::Key { channel, key };
        self.store
            .peek(subject, &limits.ask(0), now)
            .report
            .remaining_fraction()
    }

    /// A client's numbers for each configured limit (admin view), without taking anything.
    pub fn client_report(&self, client: &str, limits: &ClientLimits, now: Instant) -> Report {
        if limits.is_unlimited() {
            return Report::default();
        }
        self.store
            .peek(Subject::Client(client), &limits.ask(0), now)
            .report
    }

    /// Drop state that counts nothing any more; run periodically.
    pub fn sweep(&self, now: Instant) -> usize {
        self.store.sweep(now)
    }
}
