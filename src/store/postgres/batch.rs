//! Debits of one client taken in batches (B-pg-pool): a per-client coalescing queue, so
//! one busy client is not capped at one commit per debit.
//!
//! # How a batch forms
//! A debit joins its client's [`Lane`]. The first debit of a client with no lane starts a
//! runner task; the runner takes everything queued (up to `storage.debit_batch`, default
//! [`MAX_BATCH`]), debits it with one
//! transaction and answers each waiter, then takes what queued meanwhile, until the lane is
//! empty. A lone debit therefore runs at once (the one-statement debit of `quota.rs`); debits
//! that arrive while a commit is in flight ride the next one together.
//!
//! # Exactly the serial decisions
//! The batch transaction locks the client's balance row, then [`decide`] applies the asks in
//! queue order with the rule of the single debit (`limit − charged ≥ amount`, a refused ask
//! takes nothing), and one `UPDATE` adds the sum of the admitted amounts while the same
//! statement writes each admitted ask's precharge entry and lease. Every waiter gets the
//! decision and the balance it would have had if the asks had been applied one by one.
//!
//! # Cancellation
//! The runner is a task of its own, so a waiter that leaves never cancels anyone else's
//! debit. A waiter that left before its batch formed is skipped (nothing is debited for it);
//! one that left while its batch was in flight has already taken its session out of the
//! renewal set (`quota::Renewal`), so a precharge that commits for it is swept when its lease
//! expires. A runner that ends any other way (a panic, the runtime shutting down) drops its
//! lane in [`Runner`]'s `Drop`, and every waiter still queued gets an error at once.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::super::StoreError;
use super::quota::{Debit, DEBIT};
use super::Remote;
use crate::telemetry;

/// Most debits one batch carries by default (`storage.debit_batch`).
pub const MAX_BATCH: usize = 256;

/// One debit waiting in its client's lane.
pub(crate) struct Ask {
    pub(crate) session: String,
    pub(crate) amount: i64,
    pub(crate) limit: i64,
    pub(crate) ts_ms: i64,
    pub(crate) reply: oneshot::Sender<Result<Debit, StoreError>>,
}

/// The debits of one client waiting for the next batch; a lane exists while its runner runs.
#[derive(Default)]
struct Lane {
    pending: Vec<Ask>,
}

/// Every client's lane (bounded: a lane exists only while that client has debits queued or
/// in flight).
#[derive(Default)]
pub(crate) struct Lanes {
    map: Mutex<HashMap<String, Lane>>,
}

impl Lanes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lane>> {
        crate::lock::lock(&self.map)
    }
}

/// Queues `ask` for `client`, starting the client's runner when none runs.
pub(crate) fn submit(remote: &Arc<Remote>, client: &str, ask: Ask) {
    let mut map = remote.lanes.lock();
    if let Some(lane) = map.get_mut(client) {
        lane.pending.push(ask);
        return;
    }
    map.insert(client.to_string(), Lane { pending: vec![ask] });
    drop(map);
    let runner = Runner {
        remote: remote.clone(),
        client: client.to_string(),
        done: false,
    };
    tokio::spawn(runner.run());
}

/// A client's runner; its `Drop` removes the lane unless the runner emptied it itself.
struct Runner {
    remote: Arc<Remote>,
    client: String,
    /// The lane was removed under the lock by the runner (a new one may exist since).
    done: bool,
}

impl Drop for Runner {
    fn drop(&mut self) {
        if !self.done {
            // Dropping the queued senders answers their waiters with an error at once.
            self.remote.lanes.lock().remove(&self.client);
        }
    }
}

impl Runner {
    async fn run(mut self) {
        loop {
            let batch = self.take();
            if batch.is_empty() {
                return;
            }
            let out = debit_batch(&self.remote, &self.client, &batch).await;
            match out {
                Ok(debits) => {
                    for (ask, d) in batch.into_iter().zip(debits) {
                        // A waiter that left is gone; its unrenewed lease is swept.
                        let _ = ask.reply.send(Ok(d));
                    }
                }
                Err(e) => {
                    for ask in batch {
                        let _ = ask.reply.send(Err(copy(&e)));
                    }
                }
            }
        }
    }

    /// The next batch: the queued asks whose waiters are still there, oldest first. An
    /// empty answer means the lane was removed (the runner ends).
    fn take(&mut self) -> Vec<Ask> {
        let mut map = self.remote.lanes.lock();
        let Some(lane) = map.get_mut(&self.client) else {
            self.done = true;
            return Vec::new();
        };
        lane.pending.retain(|a| !a.reply.is_closed());
        if lane.pending.is_empty() {
            map.remove(&self.client);
            self.done = true;
            return Vec::new();
        }
        let n = lane.pending.len().min(self.remote.debit_batch);
        lane.pending.drain(..n).collect()
    }
}

/// An error for every waiter of a failed batch (the store's errors are not `Clone`).
fn copy(error: &StoreError) -> StoreError {
    match error {
        StoreError::Busy(s) => StoreError::Busy(s.clone()),
        StoreError::Unavailable(s) => StoreError::Unavailable(s.clone()),
        error => StoreError::Postgres(error.to_string()),
    }
}

/// One ask's serial outcome and the balance after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided {
    pub admitted: bool,
    pub charged: i64,
}

/// The asks `(amount, limit)` applied one by one, in order, to a balance that has `charged`
/// taken: each is admitted when `limit − charged ≥ amount` at its turn (the rule of the single
/// debit), and a refused one takes nothing. Returns each outcome and the sum admitted.
pub fn decide(mut charged: i64, asks: &[(i64, i64)]) -> (Vec<Decided>, i64) {
    let mut total: i64 = 0;
    let out = asks
        .iter()
        .map(|&(amount, limit)| {
            let room = i128::from(limit) - i128::from(charged);
            let admitted = room >= i128::from(amount);
            if admitted {
                charged = charged.saturating_add(amount);
                total = total.saturating_add(amount);
            }
            Decided { admitted, charged }
        })
        .collect();
    (out, total)
}

/// Makes sure the balance row exists; then locks it and reads it (one round trip: the two
/// statements are pipelined).
const ENSURE: &str = "INSERT INTO quota_balance (client, charged, refunded)
    VALUES ($1::text, 0, 0) ON CONFLICT (client) DO NOTHING";
const LOCK: &str = "SELECT charged, refunded FROM quota_balance WHERE client = $1::text FOR UPDATE";

/// The admitted asks of a batch: the balance moved by their sum, and each one's precharge
/// entry and lease, in one statement.
const APPLY: &str = "WITH asks AS (
        SELECT * FROM unnest($5::text[], $6::bigint[], $7::bigint[]) AS a(id, amount, ts)
    ), u AS (
        UPDATE quota_balance SET charged = charged + $2::bigint WHERE client = $1::text
        RETURNING charged
    ), l AS (
        INSERT INTO quota_lease (request_id, client, amount, replica, lease_until, ts_ms)
        SELECT id, $1::text, amount, $3::text,
               now() + $4::bigint * interval '1 millisecond', ts FROM asks
    ), e AS (
        INSERT INTO ledger (request_id, client, kind, amount, ts_ms)
        SELECT id, $1::text, 'precharge', amount, ts FROM asks
    )
    SELECT charged FROM u";

/// Debits `batch` for `client`: one statement for a single ask, else one transaction. Each
/// debit statement is counted (`switchyard_quota_debit_statements_total`).
async fn debit_batch(
    remote: &Remote,
    client: &str,
    batch: &[Ask],
) -> Result<Vec<Debit>, StoreError> {
    remote.debit_statements.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(telemetry::QUOTA_DEBIT_STATEMENTS).increment(1);
    metrics::counter!(telemetry::QUOTA_DEBITS_BATCHED).increment(batch.len() as u64);
    let ttl = super::quota::millis(remote.lease_ttl);
    if let [a] = batch {
        return remote
            .with(async |c| {
                let st = c.prepare_cached(DEBIT).await?;
                let rows = c
                    .query(
                        &st,
                        &[
                            &a.session,
                            &client,
                            &a.amount,
                            &a.limit,
                            &remote.replica,
                            &ttl,
                            &a.ts_ms,
                        ],
                    )
                    .await?;
                Ok(vec![rows.first().map_or(Debit::default(), |row| Debit {
                    admitted: row.get(0),
                    charged: row.get(1),
                    refunded: row.get(2),
                })])
            })
            .await;
    }
    remote
        .with_mut(async |c| transaction(c, remote, client, batch, ttl).await)
        .await
}

/// The batch transaction: lock and read the balance, decide every ask in order, write the
/// admitted ones with one `UPDATE`, commit. Dropped unfinished (the timeout), it rolls back.
async fn transaction(
    c: &mut deadpool_postgres::Object,
    remote: &Remote,
    client: &str,
    batch: &[Ask],
    ttl: i64,
) -> Result<Vec<Debit>, StoreError> {
    let tx = c.transaction().await?;
    let (ensure, lock) =
        futures_util::future::try_join(tx.prepare_cached(ENSURE), tx.prepare_cached(LOCK)).await?;
    let (_, row) = futures_util::future::try_join(
        tx.execute(&ensure, &[&client]),
        tx.query_one(&lock, &[&client]),
    )
    .await?;
    let (charged, refunded): (i64, i64) = (row.get(0), row.get(1));
    let asks: Vec<(i64, i64)> = batch.iter().map(|a| (a.amount, a.limit)).collect();
    let (decided, total) = decide(charged, &asks);
    if total > 0 {
        let admitted = batch.iter().zip(&decided).filter(|(_, d)| d.admitted);
        let (mut ids, mut amounts, mut ts) = (Vec::new(), Vec::new(), Vec::new());
        for (a, _) in admitted {
            ids.push(a.session.as_str());
            amounts.push(a.amount);
            ts.push(a.ts_ms);
        }
        let apply = tx.prepare_cached(APPLY).await?;
        tx.query_one(
            &apply,
            &[&client, &total, &remote.replica, &ttl, &ids, &amounts, &ts],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(decided
        .iter()
        .map(|d| Debit {
            admitted: d.admitted,
            charged: d.charged,
            refunded,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{decide, Decided};

    fn serial(mut charged: i64, asks: &[(i64, i64)]) -> Vec<bool> {
        asks.iter()
            .map(|&(a, l)| {
                let ok = l - charged >= a;
                if ok {
                    charged += a;
                }
                ok
            })
            .collect()
    }

    #[test]
    fn a_batch_decides_as_the_asks_one_by_one() {
        let asks = [(30, 100), (50, 100), (30, 100), (20, 100), (1, 100)];
        let (decision, total) = decide(0, &asks);
        let admitted: Vec<bool> = decision.iter().map(|decision| decision.admitted).collect();
        assert_eq!(admitted, [true, true, false, true, false]);
        assert_eq!(admitted, serial(0, &asks));
        assert_eq!(total, 100);
        assert_eq!(
            decision[3],
            Decided {
                admitted: true,
                charged: 100
            }
        );
        assert_eq!(
            decision[2].charged, 80,
            "a refusal reports the balance at its turn"
        );
    }

    #[test]
    fn a_balance_already_over_its_limit_admits_nothing() {
        let (decision, total) = decide(120, &[(1, 100), (5, 100)]);
        assert!(decision
            .iter()
            .all(|decision| !decision.admitted && decision.charged == 120));
        assert_eq!(total, 0);
    }

    #[test]
    fn each_ask_uses_its_own_limit_and_nothing_overflows() {
        let (decision, _) = decide(0, &[(10, 5), (10, 10), (i64::MAX, i64::MAX)]);
        assert_eq!(
            decision
                .iter()
                .map(|decision| decision.admitted)
                .collect::<Vec<_>>(),
            [false, true, false]
        );
        let (decision, _) = decide(i64::MIN + 1, &[(i64::MAX, i64::MAX)]);
        assert!(decision[0].admitted);
    }

    #[test]
    fn random_batches_match_serial_application() {
        let mut rng = fastrand::Rng::with_seed(29);
        for _ in 0..2000 {
            let charged = rng.i64(-50..200);
            let asks: Vec<(i64, i64)> = (0..rng.usize(1..20))
                .map(|_| (rng.i64(1..60), rng.i64(100..260)))
                .collect();
            let (decision, total) = decide(charged, &asks);
            let got: Vec<bool> = decision.iter().map(|decision| decision.admitted).collect();
            assert_eq!(got, serial(charged, &asks), "{charged} {asks:?}");
            let sum: i64 = asks
                .iter()
                .zip(&got)
                .filter(|(_, ok)| **ok)
                .map(|(a, _)| a.0)
                .sum();
            assert_eq!(total, sum);
        }
    }
}
