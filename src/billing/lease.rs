//! The periodic side of shared billing (R17.2): renew the leases of this replica's open
//! precharges, refund the expired ones of replicas that died (each exactly once across
//! replicas, decided in the database), and refresh the cached balances.

use std::time::Duration;

use tokio::sync::watch;

use super::Billing;
use crate::store::{now_ms, Quota};
use crate::telemetry;

/// How often the cached balances are refreshed (their staleness bound).
pub const REFRESH: Duration = Duration::from_secs(1);

/// Renew every third of the lease period, sweep every half.
fn periods(quota: &Quota) -> (Duration, Duration) {
    let ttl = quota.lease_ttl();
    (
        (ttl / 3).max(Duration::from_millis(100)),
        (ttl / 2).max(Duration::from_millis(100)),
    )
}

pub(super) async fn run(billing: &Billing, quota: &Quota, mut stop: watch::Receiver<bool>) {
    let (renew_every, sweep_every) = periods(quota);
    let tick = REFRESH.min(renew_every);
    let start = tokio::time::Instant::now();
    let (mut renewed, mut swept) = (start, start);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            r = stop.changed() => if r.is_err() || *stop.borrow() { return },
        }
        let now = tokio::time::Instant::now();
        if now >= renewed + renew_every {
            renewed = now;
            if let Err(e) = quota.renew().await {
                tracing::debug!(error = %e, "lease renewal failed");
            }
        }
        if now >= swept + sweep_every {
            swept = now;
            sweep(billing, quota).await;
        }
        refresh(billing, quota).await;
    }
}

/// One sweep: refunds expired precharges of other (dead) replicas; returns how many and the
/// micro-credits returned.
pub(super) async fn sweep(billing: &Billing, quota: &Quota) -> (usize, i64) {
    match quota.sweep(now_ms()).await {
        Ok(s) => {
            for (client, amount) in &s.refunds {
                tracing::info!(client = %client, amount_micro = amount,
                    "refunded a precharge whose replica's lease expired");
                billing.ledger.count_refunded(client, *amount);
            }
            metrics::counter!(telemetry::QUOTA_LEASE_REFUNDS).increment(s.refunds.len() as u64);
            let micro = s.refunds.iter().map(|(_, a)| *a).sum();
            (s.refunds.len(), micro)
        }
        Err(e) => {
            tracing::debug!(error = %e, "lease sweep failed");
            (0, 0)
        }
    }
}

/// Cached balances := the database's, unless this replica still holds unwritten ledger
/// entries (they would briefly vanish from the cache).
pub(super) async fn refresh(billing: &Billing, quota: &Quota) {
    if quota.held() > 0 {
        return;
    }
    match quota.balances().await {
        Ok(b) => billing.balances.sync(b),
        Err(e) => tracing::debug!(error = %e, "balance refresh failed"),
    }
}
