//! What a Redis admission holds: the granules it was counted in and its lease, so it can be
//! settled, cancelled or dropped later — each queued to the release task (none can await).

use std::sync::Arc;

use tokio::time::Instant;

use super::release::{queue, Op, Ops};
use crate::limits::refusal::Report;
use crate::limits::store::Grant;
use crate::limits::LocalGrant;

/// What one shared admission counted.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    pub prefix: Arc<str>,
    pub id: Arc<str>,
    /// Granule of rpm, rpd, tpm (-1: not counted).
    pub granules: [i64; 3],
    pub tokens: u64,
    /// A concurrency lease was taken.
    pub lease: bool,
    /// Tests: the caller's clock at admission (settles run at the same time).
    pub now_ms: Option<u64>,
}

/// An admission by the Redis store, or by its local fallback while Redis was unreachable.
#[derive(Debug)]
pub struct RedisGrant {
    report: Report,
    inner: Option<Inner>,
}

#[derive(Debug)]
enum Inner {
    Shared(Taken, Ops),
    Local(LocalGrant),
}

impl RedisGrant {
    pub(crate) fn shared(taken: Taken, report: Report, ops: Ops) -> Self {
        RedisGrant {
            report,
            inner: Some(Inner::Shared(taken, ops)),
        }
    }

    pub(crate) fn local(grant: LocalGrant) -> Self {
        RedisGrant {
            report: *grant.report(),
            inner: Some(Inner::Local(grant)),
        }
    }

    /// Counted in Redis (not by the local fallback).
    pub fn is_shared(&self) -> bool {
        matches!(self.inner, Some(Inner::Shared(..)))
    }

    fn finish(&mut self, shared: impl FnOnce(Taken) -> Op, local: impl FnOnce(LocalGrant)) {
        match self.inner.take() {
            Some(Inner::Shared(t, ops)) => {
                queue(&ops, shared(t));
            }
            Some(Inner::Local(g)) => local(g),
            None => {}
        }
    }
}

impl Grant for RedisGrant {
    fn report(&self) -> &Report {
        &self.report
    }

    fn settle(mut self, actual_tokens: u64, now: Instant) {
        self.finish(
            |t| Op::Settle(t, actual_tokens),
            |g| g.settle(actual_tokens, now),
        );
    }

    fn cancel(mut self, now: Instant) {
        self.finish(Op::Cancel, |g| g.cancel(now));
    }
}

impl Drop for RedisGrant {
    fn drop(&mut self) {
        // A local grant releases its permit in its own Drop.
        self.finish(Op::Drop, drop);
    }
}
