//! Start-up recovery (R11.2): refund every precharge the previous process left without a
//! settle or refund, then rebuild the in-memory accounts from the ledger — before serving.
//! With PostgreSQL (R17.2) other replicas may be serving: only precharges whose lease expired
//! are refunded (the sweep), and the accounts become a cache of the shared balances.

use crate::store::{now_ms, LedgerEntry, LedgerKind, StoreError};

use super::Billing;

/// What recovery did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Clients with ledger history.
    pub clients: usize,
    /// Dangling precharges refunded now.
    pub refunded: usize,
    /// Micro-credits returned by those refunds.
    pub refunded_micro: i64,
}

/// Refund dangling precharges (durably: the refunds are committed before this returns)
/// and load every client's totals into memory.
pub async fn recover(billing: &Billing) -> Result<Recovered, StoreError> {
    if let Some(q) = &billing.shared {
        let (refunded, refunded_micro) = super::lease::sweep(billing, q).await;
        let totals = q.balances().await?;
        let out = Recovered {
            clients: totals.len(),
            refunded,
            refunded_micro,
        };
        billing.balances.load(totals);
        return Ok(out);
    }
    let store = &billing.ledger.store;
    let dangling = store.dangling_precharges().await?;
    let mut totals = store.ledger_totals().await?;
    let mut out = Recovered::default();
    for p in dangling {
        let client_totals = totals.entry(p.client.to_string()).or_default();
        client_totals.charged = client_totals.charged.saturating_sub(p.amount);
        client_totals.refunded = client_totals.refunded.saturating_add(p.amount);
        tracing::info!(session = %p.request_id, client = %p.client, amount_micro = p.amount,
            "refunding a precharge left open by the previous run");
        out.refunded += 1;
        out.refunded_micro = out.refunded_micro.saturating_add(p.amount);
        billing.ledger.count_refunded(&p.client, p.amount);
        store
            .send_durable_async(LedgerEntry {
                kind: LedgerKind::Refund,
                ts_ms: now_ms(),
                foldable: false,
                ..p
            })
            .await?;
    }
    store.flush().await?;
    out.clients = totals.len();
    billing.balances.load(totals);
    Ok(out)
}
