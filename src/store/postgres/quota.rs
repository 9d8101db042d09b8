//! The shared quota in PostgreSQL (R11, R17): the conditional debit two replicas cannot both
//! pass, lease renewal, and the sweep that closes the precharges of a dead replica.
//!
//! # Exactly once across replicas
//! A precharge is three rows written by one statement: the debit of `quota_balance`
//! (conditional: `quota − charged ≥ amount`), the `precharge` ledger entry and a
//! `quota_lease` row naming the replica and until when it owns the session. Whoever deletes
//! the lease row closes the session:
//! * the owner's settle or refund (the writer, `apply.rs`) deletes it and writes its
//!   terminal entry and balance change in the same statement;
//! * the sweep deletes leases that expired and writes a refund for each, in one statement.
//!
//! Two deletes of one row cannot both return it, and the ledger's unique index allows one
//! terminal entry per session, so a settle that raced the expiry is either applied (the
//! sweep skipped the row it had locked, or found it gone) or not at all (the sweep refunded
//! first: the request is then free, counted in `switchyard_quota_lease_lost_total`).
//!
//! Expiry is judged by the database's clock only. A lease is not swept until the server has
//! been up for one lease period, so owners get to renew after a PostgreSQL restart.

use std::collections::HashMap;
use std::sync::Arc;

use super::super::{LedgerTotals, StoreError};
use super::Remote;

/// The shared quota of a PostgreSQL store; cheap to clone.
#[derive(Clone)]
pub struct Quota {
    remote: Arc<Remote>,
}

/// The outcome of a debit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Debit {
    pub admitted: bool,
    /// The client's net charge after the debit; when refused, as of the statement's
    /// snapshot (a concurrent debit may since have taken more, never less).
    pub charged: i64,
    pub refunded: i64,
}

/// What one sweep closed: (client, micro-credits refunded) per session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    pub refunds: Vec<(String, i64)>,
}

pub(crate) const DEBIT: &str = "WITH d AS (
        INSERT INTO quota_balance AS b (client, charged, refunded)
        SELECT $2::text, $3::bigint, 0 WHERE $4::bigint >= $3::bigint
        ON CONFLICT (client) DO UPDATE SET charged = b.charged + $3::bigint
            WHERE $4::bigint - b.charged >= $3::bigint
        RETURNING b.charged, b.refunded
    ), l AS (
        INSERT INTO quota_lease (request_id, client, amount, replica, lease_until, ts_ms)
        SELECT $1::text, $2::text, $3::bigint, $5::text,
               now() + $6::bigint * interval '1 millisecond', $7::bigint FROM d
    ), e AS (
        INSERT INTO ledger (request_id, client, kind, amount, ts_ms)
        SELECT $1::text, $2::text, 'precharge', $3::bigint, $7::bigint FROM d
    )
    SELECT true, charged, refunded FROM d
    UNION ALL
    SELECT false, charged, refunded FROM quota_balance
        WHERE client = $2::text AND NOT EXISTS (SELECT 1 FROM d)";

const RENEW: &str =
    "UPDATE quota_lease SET lease_until = now() + $3::bigint * interval '1 millisecond'
    WHERE replica = $2::text AND request_id = ANY($1::text[])";

const SWEEP: &str = "WITH gone AS (
        DELETE FROM quota_lease WHERE request_id IN (
            SELECT request_id FROM quota_lease
            WHERE lease_until < now()
              AND now() > pg_postmaster_start_time() + $1::bigint * interval '1 millisecond'
            ORDER BY lease_until LIMIT $2::bigint FOR UPDATE SKIP LOCKED)
        RETURNING request_id, client, amount
    ), ins AS (
        INSERT INTO ledger (request_id, client, kind, amount, ts_ms)
        SELECT request_id, client, 'refund', amount, $3::bigint FROM gone
        ON CONFLICT DO NOTHING RETURNING client, amount
    ), agg AS (
        SELECT client, SUM(amount)::BIGINT AS amount FROM ins GROUP BY client
    ), upd AS (
        UPDATE quota_balance b SET charged = b.charged - agg.amount,
            refunded = b.refunded + agg.amount
        FROM agg WHERE b.client = agg.client RETURNING 1
    )
    SELECT client, amount FROM ins";

/// A session's place in the renewal set while its debit is in flight: taken out again on
/// drop unless [`Renewal::keep`] was called (the debit was admitted).
struct Renewal<'a> {
    remote: &'a Remote,
    session: &'a str,
    keep: bool,
}

impl<'a> Renewal<'a> {
    fn enter(remote: &'a Remote, session: &'a str) -> Renewal<'a> {
        remote.live().insert(session.to_string());
        Renewal {
            remote,
            session,
            keep: false,
        }
    }

    fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for Renewal<'_> {
    fn drop(&mut self) {
        if !self.keep {
            self.remote.live().remove(self.session);
        }
    }
}

/// Most leases one sweep statement closes.
const SWEEP_BATCH: i64 = 1000;

pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Quota {
    pub(crate) fn new(remote: Arc<Remote>) -> Quota {
        Quota { remote }
    }

    /// This replica's id on its lease rows.
    pub fn replica(&self) -> &str {
        &self.remote.replica
    }

    /// How long a lease lasts without renewal.
    pub fn lease_ttl(&self) -> std::time::Duration {
        self.remote.lease_ttl
    }

    /// Whether the database answered the last call.
    pub fn is_up(&self) -> bool {
        self.remote.reach.is_up()
    }

    /// Writes the writer holds because the database did not answer.
    pub fn held(&self) -> usize {
        self.remote.held.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Debits `amount` from `client` if `limit − charged ≥ amount`, and on success writes
    /// the precharge entry and this replica's lease for `session`; the session is renewed
    /// from now until its settle or refund is committed. Concurrent debits of one client are
    /// taken together in one transaction (`batch.rs`), each decided as if alone in queue
    /// order. Bounded by the pool timeout.
    pub async fn debit(
        &self,
        session: &str,
        client: &str,
        amount: i64,
        limit: i64,
        ts_ms: i64,
    ) -> Result<Debit, StoreError> {
        let remote = &self.remote;
        // The guard exists before the first await (B-cancel-guards): a caller cancelled while
        // its debit waits or runs takes the session out of the renewal set, so a lease the
        // batch did commit expires and is swept instead of renewed for good.
        let mut renewal = Renewal::enter(remote, session);
        let (reply, answer) = tokio::sync::oneshot::channel();
        let ask = super::batch::Ask {
            session: session.to_string(),
            amount,
            limit,
            ts_ms,
            reply,
        };
        super::batch::submit(remote, client, ask);
        let out = match tokio::time::timeout(remote.timeout, answer).await {
            Ok(Ok(out)) => out,
            Ok(Err(_)) => Err(StoreError::Task("the quota debit's runner ended".into())),
            Err(_) => Err(StoreError::Busy(format!(
                "no quota debit within {:?}",
                remote.timeout
            ))),
        };
        if matches!(out, Ok(Debit { admitted: true, .. })) {
            renewal.keep();
        }
        // Otherwise (refused or unknown) the guard leaves: a lease that did commit is not
        // renewed and gets swept.
        out
    }

    /// Debit statements (single or batched) this replica has sent: fewer than debits when
    /// batches formed (diagnostics and tests).
    pub fn debit_statements(&self) -> u64 {
        self.remote
            .debit_statements
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Extends the leases of every session this replica still owns; returns how many.
    pub async fn renew(&self) -> Result<u64, StoreError> {
        let remote = &self.remote;
        let ids: Vec<String> = remote.live().iter().cloned().collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let ttl = millis(remote.lease_ttl);
        remote
            .with(async |c| {
                let st = c.prepare_cached(RENEW).await?;
                Ok(c.execute(&st, &[&ids, &remote.replica, &ttl]).await?)
            })
            .await
    }

    /// Refunds the precharges whose lease expired (their replica died), each exactly once
    /// across replicas.
    pub async fn sweep(&self, ts_ms: i64) -> Result<Swept, StoreError> {
        let remote = &self.remote;
        let ttl = millis(remote.lease_ttl);
        remote
            .with(async |c| {
                let st = c.prepare_cached(SWEEP).await?;
                // The sweep locks leases, then balances; a writer batch closing sessions of the
                // same client holds a balance and wants a lease. PostgreSQL breaks that cycle by
                // failing one side: the writer re-applies its ops one by one, the sweep retries
                // (nothing of an aborted statement was applied).
                let mut tries = 0;
                let rows = loop {
                    match c.query(&st, &[&ttl, &SWEEP_BATCH, &ts_ms]).await {
                        Err(e) if tries < 3 && deadlocked(&e) => tries += 1,
                        other => break other?,
                    }
                };
                Ok(Swept {
                    refunds: rows.iter().map(|row| (row.get(0), row.get(1))).collect(),
                })
            })
            .await
    }

    /// Every client's net charge and refunds as the database has them now.
    pub async fn balances(&self) -> Result<HashMap<String, LedgerTotals>, StoreError> {
        self.remote
            .with(async |c| {
                let st = c
                    .prepare_cached("SELECT client, charged, refunded FROM quota_balance")
                    .await?;
                let rows = c.query(&st, &[]).await?;
                Ok(rows
                    .iter()
                    .map(|row| {
                        (
                            row.get::<_, String>(0),
                            LedgerTotals {
                                charged: row.get(1),
                                refunded: row.get(2),
                            },
                        )
                    })
                    .collect())
            })
            .await
    }

    /// Sessions this replica still owns (for diagnostics and tests).
    pub fn owned(&self) -> usize {
        self.remote.live().len()
    }
}

/// A statement PostgreSQL aborted to break a deadlock (or a serialization conflict): safe
/// to run again, nothing of it was applied.
fn deadlocked(error: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    error.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}
