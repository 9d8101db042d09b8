//! One store type for a gateway that may or may not share its limits: the local store
//! (one process) or the Redis store (`shared.redis`), chosen at start.

use tokio::time::Instant;

use super::{RedisGrant, RedisStore};
use crate::limits::refusal::{Refusal, Report};
use crate::limits::store::{Ask, Grant, Peek, Store};
use crate::limits::{Local, LocalGrant, Subject};

/// The local store or the Redis store.
#[derive(Debug)]
pub enum LimitStore {
    Local(Local),
    Shared(Box<RedisStore>),
}

/// A grant of either store.
#[derive(Debug)]
pub enum LimitGrant {
    Local(LocalGrant),
    Shared(RedisGrant),
}

impl Grant for LimitGrant {
    fn report(&self) -> &Report {
        match self {
            LimitGrant::Local(g) => g.report(),
            LimitGrant::Shared(g) => g.report(),
        }
    }

    fn settle(self, actual_tokens: u64, now: Instant) {
        match self {
            LimitGrant::Local(g) => g.settle(actual_tokens, now),
            LimitGrant::Shared(g) => g.settle(actual_tokens, now),
        }
    }

    fn cancel(self, now: Instant) {
        match self {
            LimitGrant::Local(g) => g.cancel(now),
            LimitGrant::Shared(g) => g.cancel(now),
        }
    }
}

impl Store for LimitStore {
    type Grant = LimitGrant;

    async fn admit(
        &self,
        subject: Subject<'_>,
        ask: &Ask,
        now: Instant,
    ) -> Result<LimitGrant, Refusal> {
        match self {
            LimitStore::Local(s) => s.admit_now(subject, ask, now).map(LimitGrant::Local),
            // Boxed: the Redis round trip's state would otherwise sit in every request's
            // future (moved by value at least once per request; a performance measure).
            LimitStore::Shared(s) => Box::pin(s.admit(subject, ask, now))
                .await
                .map(LimitGrant::Shared),
        }
    }

    fn peek(&self, subject: Subject<'_>, ask: &Ask, now: Instant) -> Peek {
        match self {
            LimitStore::Local(s) => s.peek(subject, ask, now),
            LimitStore::Shared(s) => s.peek(subject, ask, now),
        }
    }

    fn sweep(&self, now: Instant) -> usize {
        match self {
            LimitStore::Local(s) => s.sweep(now),
            LimitStore::Shared(s) => s.sweep(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{ClientLimits, Limiter};

    /// The local arm keeps the local semantics (what a gateway without `shared.redis`
    /// gets through this type).
    #[tokio::test(start_paused = true)]
    async fn the_local_arm_limits_like_the_local_store() {
        let limiter = Limiter::new(LimitStore::Local(Local::default()));
        let lim = ClientLimits {
            rpm: 2,
            concurrency: 1,
            ..Default::default()
        };
        let first = limiter
            .admit_client("c", &lim, 0, Instant::now())
            .await
            .unwrap();
        let busy = limiter.admit_client("c", &lim, 0, Instant::now()).await;
        assert!(busy.is_err(), "concurrency 1 held");
        first.settle(0, Instant::now());
        let second = limiter
            .admit_client("c", &lim, 0, Instant::now())
            .await
            .unwrap();
        second.cancel(Instant::now());
        let third = limiter
            .admit_client("c", &lim, 0, Instant::now())
            .await
            .unwrap();
        drop(third);
        let refused = limiter
            .admit_client("c", &lim, 0, Instant::now())
            .await
            .unwrap_err();
        assert_eq!(
            refused.kind,
            crate::limits::Kind::Rpm,
            "two counted (one cancelled)"
        );
    }
}
