//! Rate limits (R15): per-client and per-upstream-key request, token and concurrency limits,
//! upstream reset learning, and the 429 headers SDKs read. Pure: no I/O, no request path; of the
//! config it reads only the limit values ([`ClientLimits`], [`KeyLimits`]).
//!
//! # Algorithm: a conservative sliding window, not GCRA
//!
//! Every counted limit (`rpm`, `rpd`, `tpm`) is a sliding window of `slots` granules
//! ([`window`]): one minute as 60 one-second granules, one day as 288 five-minute granules.
//! A request is admitted when the sum of every granule that overlaps the last window — the
//! oldest, partly-overlapping granule counted whole — plus its cost fits the limit.
//!
//! Why this and not GCRA (or a token bucket, which GCRA is): a limit of `rpm: 10` must admit
//! a burst of 10 at once (clients send in bursts, and the end-to-end contract is "10 of 40
//! concurrent requests"), so GCRA would need a burst tolerance of the whole limit — and then
//! it refills continuously, admitting up to `2 × 10 − 1` in some 60-second span: the very
//! boundary overshoot a fixed window has, moved. GCRA with no burst tolerance spaces requests
//! 6 s apart and refuses legitimate bursts. The sliding window admits the full burst and
//! never more than the limit in ANY window of its length (proved by a property test); the
//! price is that capacity frees up to one granule late (≤ 1 s for minute limits, ≤ 5 min for
//! `rpd`), never early. A sliding-window *estimate* (previous window × overlap) was rejected
//! too: it can exceed the limit when the previous window's requests bunch at its end.
//!
//! Tokens (`tpm`, input + output) use the same window with a variable cost: the admission
//! reserves the estimate (prompt estimate + `max_tokens`, the precharge's estimate) in the
//! current granule; the settle gives back the unused part to that granule (if it is still in
//! the window) or adds the overrun to the current granule. A cut stream settles at what it
//! used. A reservation larger than the limit is refused as one that can never fit.
//!
//! Concurrency is a count of held permits; each [`Admission`] holds one and gives it back on
//! drop, so every exit path — success, error, client disconnect, a cancelled task — releases it.
//!
//! # The store seam and the shape of a Redis backend
//!
//! [`Limiter`] holds a [`Store`]. [`Local`] (the default) keeps one small state cell per
//! subject in a sharded map (no global lock; a cell has its own mutex, held for one
//! transition); its admission is synchronous and allocation-free once the subject's cell
//! exists. The shared backend (`crate::shared::limits::RedisStore`, R17) implements
//! the same [`Store`] with the same windows:
//!
//! - keys hash-tagged per subject so one Lua script sees them all on one Redis Cluster slot:
//!   `sy:lim:{c:<client>}:rpm|rpd|tpm|cc`, `sy:lim:{k:<channel>/<key fingerprint>}:…`;
//! - each window a HASH `granule index → count` with `PEXPIRE` of window + granule;
//! - `admit` = one `EVALSHA`: read `TIME`, drop expired granule fields, sum, check every
//!   configured kind, and only if all fit `HINCRBY` each and add a concurrency lease
//!   (`ZADD cc <lease expiry> <admission id>` after `ZREMRANGEBYSCORE` of expired leases, so
//!   a killed replica's permits expire); it returns the granule ids taken, or the refused
//!   kind with its wait and the numbers for the headers;
//! - settle / cancel / release are `HINCRBY` on the recorded granule and `ZREM` of the lease;
//!   a grant's `Drop` cannot await, so it queues them to a background task, which also
//!   renews live leases;
//! - planning queries (`key_room`, `key_remaining_fraction`) read a local mirror refreshed by
//!   each script reply, never a round trip per candidate.
//!
//! # Memory
//!
//! Subjects come from config, but the map is bounded anyway ([`Bounds`]): a cell whose
//! windows are empty and that no admission holds is removed by [`Limiter::sweep`]; inserting
//! into a full shard first drops those, then the least recently used unheld cell. A fully
//! unlimited subject gets no cell at all.
//!
//! # Upstream learning
//!
//! [`upstream`] turns a 429's `retry-after-ms`, `Retry-After`, OpenAI `x-ratelimit-reset-*`
//! and Anthropic `anthropic-ratelimit-*-reset` into a wait; [`KeyCooldowns`] holds that key
//! (by channel name and key fingerprint) back until then, bounded by a configured maximum.
pub mod cell;
pub mod cooldowns;
pub mod duration;
pub mod headers;
pub mod limiter;
pub mod local;
pub mod refusal;
pub mod store;
pub mod subject;
pub mod upstream;
pub mod window;

#[cfg(test)]
mod tests;

pub use cooldowns::KeyCooldowns;
pub use headers::{refusal_headers, report_headers};
pub use limiter::{Admission, Limiter};
pub use local::{Bounds, Local, LocalGrant};
pub use refusal::{Kind, Numbers, Refusal, Report, Room};
pub use store::{Ask, Grant, Peek, Store};
pub use subject::Subject;

/// The limit values are config types (`config::model`); their admission questions live here.
pub use crate::config::model::{ClientLimits, KeyLimits};

impl ClientLimits {
    /// No limit set: such a client pays nothing on the request path.
    pub fn is_unlimited(&self) -> bool {
        self.ask(0).is_unlimited()
    }

    /// The store's question for one request that reserves `tokens`.
    pub fn ask(&self, tokens: u64) -> Ask {
        Ask {
            rpm: self.rpm,
            rpd: self.rpd,
            tpm: self.tpm,
            concurrency: self.concurrency,
            tokens,
        }
    }
}

impl KeyLimits {
    pub fn is_unlimited(&self) -> bool {
        self.ask(0).is_unlimited()
    }

    /// The store's question for one attempt that reserves `tokens`.
    pub fn ask(&self, tokens: u64) -> Ask {
        Ask {
            rpm: self.rpm,
            rpd: 0,
            tpm: self.tpm,
            concurrency: self.concurrency,
            tokens,
        }
    }
}
