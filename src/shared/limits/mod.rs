//! Rate limits shared by replicas (R15.1, R17.1, R17.2): a Redis implementation of the
//! `limits::Store` seam with the same semantics as the local store — sliding windows,
//! token reserve/reconcile, concurrency permits — in one atomic script call per admission
//! ([`lua`]). Concurrency permits are leases that expire ([`LEASE`]) unless the replica
//! holding them renews them, so a replica that dies gives its permits back.
//!
//! Redis unreachable: the admission is answered by a local store with every limit divided
//! by `shared.replicas` (at least 1 each), so N replicas together admit at most
//! `max(limit, N)` per window while it lasts — plus what Redis had already counted in the
//! window the outage began in. Redis is tried again at most every [`RETRY_EVERY`]; the
//! connection's health flag logs the outage once.
//!
//! `settle` / `cancel` / a dropped grant cannot await: they are queued to a background task
//! (`release.rs`), which also renews the leases of live grants. Planning queries (`peek`)
//! read a local mirror of the numbers the last script reply carried — never a round trip.
//! The mirror ages (B-shared-mirror-ages): a reply's `reset` is a duration measured when it
//! came, so a mirrored window whose reset has passed since reads as full again, and a
//! mirrored "no concurrency permit left" is believed for [`CONCURRENCY_RETRY`] only. A key
//! held back by its numbers is therefore tried again by the time Redis would admit it.

mod any;
mod grant;
pub mod lua;
mod release;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::conn::Conn;
use crate::limits::cell::CONCURRENCY_RETRY;
use crate::limits::refusal::{Kind, Numbers, Refusal, Report, Room};
use crate::limits::store::{Ask, Peek, Store};
use crate::limits::{Local, Subject};

pub use any::{LimitGrant, LimitStore};
pub use grant::RedisGrant;
use lua::ADMIT_SCRIPT;
use release::Op;

/// A concurrency permit's lease; renewed every third of it while its request runs.
pub const LEASE: Duration = Duration::from_secs(30);
/// While Redis is down, it is tried again at most this often (one request pays the try).
pub const RETRY_EVERY: Duration = Duration::from_millis(250);
/// Subjects the planning mirror remembers at most.
const MIRROR_CAP: usize = 32_768;

/// Where "now" comes from: Redis's clock, or (tests) the `now` the caller passes.
#[derive(Debug, Clone, Copy)]
enum Clock {
    Redis,
    Caller(Instant),
}

/// The subject's keys: `sy:lim:{c:<client>}` or `sy:lim:{k:<channel>/<key fp>}` + `:rpm`…
pub fn subject_prefix(subject: Subject<'_>) -> String {
    let tag = match subject {
        Subject::Client(c) => format!("c:{c}"),
        Subject::Key { channel, key } => format!("k:{channel}/{key}"),
    };
    format!("sy:lim:{{{}}}", super::wire::tag(&tag))
}

fn keys(prefix: &str) -> [String; 4] {
    ["rpm", "rpd", "tpm", "cc"].map(|k| format!("{prefix}:{k}"))
}

/// Rate-limit state in Redis, with a divided local fallback.
pub struct RedisStore {
    conn: Conn,
    replicas: u32,
    fallback: Local,
    clock: Clock,
    /// The last reply's numbers per subject prefix, and when they were true.
    mirror: Mutex<HashMap<String, (Report, Instant)>>,
    ops: release::Ops,
    ids: AtomicU64,
    /// Not before this (ms since `origin`) is Redis tried again while down.
    retry_at: AtomicU64,
    origin: Instant,
    /// This store's part of admission ids (unique across replicas).
    tag: u64,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("replicas", &self.replicas)
            .field("up", &self.conn.health.is_up())
            .finish()
    }
}

impl RedisStore {
    /// A store on `conn` for a deployment of `replicas` replicas. Spawns its release task
    /// (call within a Tokio runtime).
    pub fn new(conn: Conn, replicas: u32) -> RedisStore {
        let (tx, rx) = release::channel();
        tokio::spawn(release::run(conn.clone(), rx));
        RedisStore {
            conn,
            replicas: replicas.max(1),
            fallback: Local::default(),
            clock: Clock::Redis,
            mirror: Mutex::new(HashMap::new()),
            ops: tx,
            ids: AtomicU64::new(fastrand::u64(..) >> 16),
            retry_at: AtomicU64::new(0),
            origin: Instant::now(),
            tag: fastrand::u64(..),
        }
    }

    /// Tests: take time from the `now` each call passes instead of Redis's clock, so window
    /// edges can be driven without waiting.
    pub fn with_caller_clock(mut self) -> RedisStore {
        self.clock = Clock::Caller(Instant::now());
        self
    }

    fn now_arg(&self, now: Instant) -> u64 {
        match self.clock {
            Clock::Redis => 0,
            // Far from zero, so "0 = Redis time" never collides.
            Clock::Caller(epoch) => {
                1_000_000_000_000 + now.saturating_duration_since(epoch).as_millis() as u64
            }
        }
    }

    fn mirror(&self) -> MutexGuard<'_, HashMap<String, (Report, Instant)>> {
        crate::lock::lock(&self.mirror)
    }

    /// Should this admission go to Redis? Yes while up; while down, once per RETRY_EVERY.
    fn try_redis(&self) -> bool {
        if self.conn.health.is_up() || self.conn.health.is_unknown() {
            return true;
        }
        let now = self.origin.elapsed().as_millis() as u64;
        let at = self.retry_at.load(Ordering::Relaxed);
        now >= at
            && self
                .retry_at
                .compare_exchange(
                    at,
                    now + RETRY_EVERY.as_millis() as u64,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// The ask with every limit divided by the replica count (at least 1 each).
    fn divided(&self, ask: &Ask) -> Ask {
        let n = u64::from(self.replicas);
        let divide = |v: u64| if v == 0 { 0 } else { (v / n).max(1) };
        Ask {
            rpm: divide(ask.rpm),
            rpd: divide(ask.rpd),
            tpm: divide(ask.tpm),
            concurrency: divide(u64::from(ask.concurrency)) as u32,
            tokens: ask.tokens,
        }
    }

    /// A new admission id (unique across replicas).
    fn next_id(&self) -> String {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        format!("{:x}:{id}", self.tag)
    }

    /// One admission script call. `id` names the admission: a call repeated with the same id
    /// (after a reply lost to an I/O error) returns the first call's reply and counts
    /// nothing again (B-shared-pipeline).
    async fn admit_shared(
        &self,
        subject: Subject<'_>,
        ask: &Ask,
        now: Instant,
        id_s: &str,
    ) -> Result<Result<RedisGrant, Refusal>, super::conn::CallError> {
        let prefix = subject_prefix(subject);
        let [rpm, rpd, tpm, cc] = keys(&prefix);
        let done = format!("{prefix}:a:{id_s}");
        let id_s = id_s.to_string();
        let now_ms = self.now_arg(now);
        let asked = *ask;
        let ids = id_s.clone();
        // Armed before the script is awaited (B-cancel-guards): a request cancelled during it ends
        // the concurrency lease the script may have taken, instead of leaving it for LEASE.
        let mut pending = Pending {
            ops: &self.ops,
            lease: (ask.concurrency > 0).then(|| (prefix.clone(), id_s.clone())),
        };
        let counts: Vec<i64> = self
            .conn
            .call(|mut conn| async move {
                ADMIT_SCRIPT
                    .key(rpm)
                    .key(rpd)
                    .key(tpm)
                    .key(cc)
                    .key(done)
                    .arg(asked.rpm)
                    .arg(asked.rpd)
                    .arg(asked.tpm)
                    .arg(asked.concurrency)
                    .arg(asked.tokens)
                    .arg(LEASE.as_millis() as u64)
                    .arg(ids)
                    .arg(now_ms)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        pending.lease = None;
        let reply = Reply::parse(&counts, ask);
        self.remember(&prefix, reply.report, now);
        if !reply.admitted {
            return Ok(Err(reply.refusal(ask)));
        }
        let taken = grant::Taken {
            prefix: Arc::from(prefix),
            id: Arc::from(id_s),
            granules: reply.granules,
            tokens: ask.tokens,
            lease: ask.concurrency > 0,
            now_ms: matches!(self.clock, Clock::Caller(_)).then_some(now_ms),
        };
        if taken.lease {
            release::queue(&self.ops, Op::Hold(taken.prefix.clone(), taken.id.clone()));
        }
        Ok(Ok(RedisGrant::shared(
            taken,
            reply.report,
            self.ops.clone(),
        )))
    }

    fn remember(&self, prefix: &str, report: Report, at: Instant) {
        let mut mirror = self.mirror();
        if mirror.len() >= MIRROR_CAP && !mirror.contains_key(prefix) {
            mirror.clear();
        }
        mirror.insert(prefix.to_string(), (report, at));
    }
}

/// An admission script in flight; dropped before its reply, it queues the end of the
/// concurrency lease it may have taken (the counts it made stay, as a dropped grant's do).
struct Pending<'a> {
    ops: &'a release::Ops,
    /// (subject prefix, admission id) of a lease the script takes when admitted.
    lease: Option<(String, String)>,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some((prefix, id)) = self.lease.take() {
            release::queue(
                self.ops,
                Op::Drop(grant::Taken {
                    prefix: Arc::from(prefix),
                    id: Arc::from(id),
                    granules: [-1; 3],
                    tokens: 0,
                    lease: true,
                    now_ms: None,
                }),
            );
        }
    }
}

/// A decoded script reply.
struct Reply {
    admitted: bool,
    kind: Kind,
    wait_ms: Option<u64>,
    report: Report,
    granules: [i64; 3],
}

impl Reply {
    fn parse(r: &[i64], ask: &Ask) -> Reply {
        let at = |i: usize| r.get(i).copied().unwrap_or(0);
        let mut report = Report::default();
        let counted = [
            (Kind::Rpm, ask.rpm),
            (Kind::Rpd, ask.rpd),
            (Kind::Tpm, ask.tpm),
        ];
        for (i, (kind, limit)) in counted.into_iter().enumerate() {
            if limit > 0 {
                let used = at(3 + i).max(0) as u64;
                report.set(
                    kind,
                    Some(Numbers {
                        limit,
                        remaining: limit.saturating_sub(used),
                        reset: Duration::from_millis(at(7 + i).max(0) as u64),
                    }),
                );
            }
        }
        if ask.concurrency > 0 {
            let limit = u64::from(ask.concurrency);
            let held = at(6).max(0) as u64;
            report.set(
                Kind::Concurrency,
                Some(Numbers {
                    limit,
                    remaining: limit.saturating_sub(held),
                    reset: Duration::ZERO,
                }),
            );
        }
        let kind = match at(1) {
            2 => Kind::Rpd,
            3 => Kind::Tpm,
            4 => Kind::Concurrency,
            _ => Kind::Rpm,
        };
        Reply {
            admitted: at(0) == 1,
            kind,
            wait_ms: (at(2) >= 0).then(|| at(2) as u64),
            report,
            granules: [at(10), at(11), at(12)],
        }
    }

    fn refusal(&self, ask: &Ask) -> Refusal {
        Refusal {
            kind: self.kind,
            retry_after: self.wait_ms.map(Duration::from_millis),
            needed: if self.kind == Kind::Tpm {
                ask.tokens
            } else {
                1
            },
            report: self.report,
        }
    }
}

impl Store for RedisStore {
    type Grant = RedisGrant;

    async fn admit(
        &self,
        subject: Subject<'_>,
        ask: &Ask,
        now: Instant,
    ) -> Result<RedisGrant, Refusal> {
        if self.try_redis() {
            let id = self.next_id();
            let mut admitted = self.admit_shared(subject, ask, now, &id).await;
            if matches!(&admitted, Err(e) if e.is_connection()) {
                // The connection had died (Redis restarted): its reconnect may answer now.
                // The same id: if the first call did run, it is not counted twice.
                admitted = self.admit_shared(subject, ask, now, &id).await;
            }
            match admitted {
                Ok(grant) => {
                    self.conn.health.mark_up();
                    return grant;
                }
                Err(e) => self.conn.health.mark_down(&e),
            }
        }
        metrics::counter!(crate::telemetry::SHARED_LIMIT_FALLBACKS).increment(1);
        self.fallback
            .admit_now(subject, &self.divided(ask), now)
            .map(RedisGrant::local)
    }

    fn peek(&self, subject: Subject<'_>, ask: &Ask, now: Instant) -> Peek {
        if !self.conn.health.is_up() {
            return self.fallback.peek(subject, &self.divided(ask), now);
        }
        let report = self
            .mirror()
            .get(&subject_prefix(subject))
            .map(|(r, at)| aged(r, now.saturating_duration_since(*at)));
        match report {
            Some(report) => Peek {
                room: room(&report, ask),
                report,
            },
            None => self.fallback.peek(subject, ask, now),
        }
    }

    fn sweep(&self, now: Instant) -> usize {
        self.fallback.sweep(now)
    }
}

/// Mirrored numbers `elapsed` after their reply: a window whose reset has passed is full
/// again (everything it counted has left it), the others' resets are that much nearer; a
/// concurrency count older than [`CONCURRENCY_RETRY`] is no longer believed.
fn aged(report: &Report, elapsed: Duration) -> Report {
    let mut out = *report;
    for kind in [Kind::Rpm, Kind::Rpd, Kind::Tpm] {
        if let Some(numbers) = report.get(kind) {
            let numbers = if elapsed >= numbers.reset {
                Numbers {
                    remaining: numbers.limit,
                    reset: Duration::ZERO,
                    ..numbers
                }
            } else {
                Numbers {
                    reset: numbers.reset - elapsed,
                    ..numbers
                }
            };
            out.set(kind, Some(numbers));
        }
    }
    if let Some(n) = report.get(Kind::Concurrency) {
        if elapsed >= CONCURRENCY_RETRY {
            out.set(
                Kind::Concurrency,
                Some(Numbers {
                    remaining: n.limit,
                    ..n
                }),
            );
        }
    }
    out
}

/// Room for `ask` as the mirrored numbers see it.
fn room(report: &Report, ask: &Ask) -> Room {
    let mut wait = Duration::ZERO;
    let counted = [(Kind::Rpm, 1), (Kind::Rpd, 1), (Kind::Tpm, ask.tokens)];
    for (kind, cost) in counted {
        if let Some(n) = report.get(kind) {
            if cost > n.limit {
                return Room::Never;
            }
            if n.remaining < cost {
                wait = wait.max(n.reset);
            }
        }
    }
    if report
        .get(Kind::Concurrency)
        .is_some_and(|n| n.remaining == 0)
    {
        wait = wait.max(CONCURRENCY_RETRY);
    }
    if wait.is_zero() {
        Room::Now
    } else {
        Room::After(wait)
    }
}

#[cfg(test)]
mod tests;
