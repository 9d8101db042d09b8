//! The quota debit when balances live in PostgreSQL (R11.3, R17): one conditional statement
//! per priced request of a quota-limited client, and what happens while the database does not
//! answer (fail closed with 503, or with `shared.fail_open` admit from the last known
//! balance).
//!
//! # Overshoot while PostgreSQL is unreachable (`fail_open: true`)
//! Each replica then debits its own cached copy of the balance: the value the database
//! returned with the last debit or the last refresh (at most one second old). N replicas can
//! together admit at most N × the remaining balance they last saw, so a client's overshoot is
//! at most (N − 1) × that balance, plus the usual settle overshoot of requests in flight.
//! These sessions write no precharge (there is nothing to renew); their settle carries the
//! full cost and is applied when the database answers again, a refund writes nothing.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::balances::{Account, Refused};
use super::price::{self, Estimate};
use super::{Billing, Session};
use crate::config::model::{Client, Price};
use crate::error::GatewayError;
use crate::store::{now_ms, LedgerEntry, LedgerKind, Quota};
use crate::telemetry;

/// A session about to be opened against the shared balance.
pub(super) struct Open<'a> {
    pub(super) client: &'a Client,
    pub(super) price: Price,
    pub(super) estimate: Estimate,
    pub(super) id: String,
    pub(super) account: Arc<Account>,
    /// The precharge (> 0).
    pub(super) amount: i64,
    /// The client's quota in micro-credits.
    pub(super) limit: i64,
}

impl Billing {
    pub(super) async fn begin_shared(
        &self,
        quota: &Quota,
        open: Open<'_>,
    ) -> Result<Session, GatewayError> {
        if quota.is_up() {
            // Armed before the first await (B-cancel-guards): a request cancelled while its debit is
            // in flight queues the refund of a precharge that may have committed.
            let mut inflight = InFlight {
                armed: true,
                billing: self,
                session: &open.id,
                client: &open.client.name,
                amount: open.amount,
            };
            let debited = quota
                .debit(
                    &open.id,
                    &open.client.name,
                    open.amount,
                    open.limit,
                    now_ms(),
                )
                .await;
            inflight.armed = false;
            drop(inflight);
            match debited {
                Ok(d) => {
                    open.account.set(d.charged, d.refunded);
                    if !d.admitted {
                        // `charged` is as of the statement's snapshot: a concurrent debit may
                        // have taken more since, never less.
                        let left = (open.limit - d.charged).min(open.amount - 1);
                        return Err(refuse(&open.client.name, open.amount, left));
                    }
                    return Ok(self.session(open, false));
                }
                Err(e) => {
                    tracing::debug!(error = %e, client = %open.client.name, "quota debit failed");
                }
            }
        }
        if !self.fail_open.load(Ordering::Relaxed) {
            metrics::counter!(telemetry::QUOTA_UNAVAILABLE, "mode" => "fail_closed").increment(1);
            return Err(unavailable());
        }
        metrics::counter!(telemetry::QUOTA_UNAVAILABLE, "mode" => "fail_open").increment(1);
        match open.account.try_debit(open.amount, Some(open.limit)) {
            Ok(()) => Ok(self.session(open, true)),
            Err(Refused { remaining }) => Err(refuse(&open.client.name, open.amount, remaining)),
        }
    }

    fn session(&self, open: Open<'_>, offline: bool) -> Session {
        let session = Session::new(
            self.ledger.clone(),
            open.account,
            open.id,
            open.client.name.clone(),
            Some(open.price),
            open.estimate,
            open.amount,
        );
        if offline {
            session.offline()
        } else {
            session
        }
    }

    /// Renew this replica's leases, refund those of dead replicas and refresh the cached
    /// balances, until `stop` turns true (only with PostgreSQL).
    pub async fn keep_leases(&self, stop: tokio::sync::watch::Receiver<bool>) {
        if let Some(q) = &self.shared {
            super::lease::run(self, q, stop).await;
        }
    }
}

/// A debit in flight: dropped (the request was cancelled during the statement) it queues
/// the session's refund. The writer applies it only if the precharge's lease row exists
/// (`store::postgres::apply`), so it returns a committed precharge at once and is a no-op for one
/// that never committed; a precharge that commits after it is no longer renewed and is
/// swept when its lease expires.
struct InFlight<'a> {
    armed: bool,
    billing: &'a Billing,
    session: &'a str,
    client: &'a str,
    amount: i64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::info!(session = %self.session, client = %self.client,
            "request cancelled during its quota debit: refunding the precharge");
        self.billing.ledger.send(LedgerEntry {
            request_id: self.session.to_string(),
            client: self.client.into(),
            kind: LedgerKind::Refund,
            amount: self.amount,
            ts_ms: now_ms(),
            foldable: false,
        });
    }
}

/// The 402 of a balance that cannot cover `need` (counted and logged once per request).
pub(super) fn refuse(client: &str, need: i64, remaining: i64) -> GatewayError {
    telemetry::quota().rejected(client);
    tracing::info!(client = %client, need_micro = need, remaining_micro = remaining,
        "request refused: quota exhausted");
    GatewayError::quota_exceeded(price::credits(need), price::credits(remaining.max(0)))
}

/// The 503 of a quota-limited client while the database cannot be reached (fail closed).
fn unavailable() -> GatewayError {
    GatewayError::new(
        http::StatusCode::SERVICE_UNAVAILABLE,
        "storage_unavailable",
        "api_error",
        "quota accounting is paused because the gateway cannot reach its database (PostgreSQL); retry later",
    )
}
