//! The billing session of one request: pre-charged once before the attempt loop, then
//! settled or refunded exactly once (R11.1). `settle` and `refund` consume the session; a
//! session dropped without either (panic, early return, aborted task) refunds in `Drop`.

use std::sync::Arc;

use super::balances::Account;
use super::price::{self, Estimate};
use crate::config::model::Price;
use crate::store::{now_ms, LedgerEntry, LedgerKind, Store};
use crate::telemetry;
use crate::wire::usage::Usage;

/// Sends ledger entries through the store's durable path and counts credits for metrics.
pub(crate) struct Ledger {
    pub(crate) store: Store,
}

impl Ledger {
    pub(crate) fn new(store: Store) -> Ledger {
        Ledger { store }
    }

    /// Queues `entry` without blocking the caller: at once when the writer queue has room
    /// (so it is queued before the response is sent), else from a runtime it is handed to a
    /// task using `send_durable_async`; outside one it is sent blocking. Never dropped on a
    /// full queue; an entry lost to a closed store is refunded by start-up recovery.
    pub(crate) fn send(&self, entry: LedgerEntry) {
        let Some(op) = self.store.offer(entry) else {
            return;
        };
        let store = self.store.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move {
                    if let Err(e) = store.send_durable_async(op).await {
                        tracing::error!(error = %e, "ledger entry not queued");
                    }
                });
            }
            Err(_) => {
                if let Err(e) = store.send_durable(op) {
                    tracing::error!(error = %e, "ledger entry not queued");
                }
            }
        }
    }

    /// Queues `entry` like [`Ledger::send`] but waits (backpressure) until it is queued. The
    /// wait may be cancelled — the caller's request ended — without losing the entry: a full
    /// queue is waited on by a task of its own.
    pub(crate) async fn queue(&self, entry: LedgerEntry) {
        let Some(op) = self.store.offer(entry) else {
            return;
        };
        let store = self.store.clone();
        let sent = tokio::spawn(async move { store.send_durable_async(op).await });
        match sent.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "ledger entry not queued"),
            Err(e) => tracing::error!(error = %e, "ledger entry task failed"),
        }
    }

    /// Credits charged to `client`, for the per-client counter.
    pub(crate) fn count_charged(&self, client: &str, micro: i64) {
        telemetry::quota().charged(client, micro, price::MICRO);
    }

    pub(crate) fn count_refunded(&self, client: &str, micro: i64) {
        telemetry::quota().refunded(client, micro, price::MICRO);
    }
}

/// What an open session carries.
struct Open {
    ledger: Arc<Ledger>,
    account: Arc<Account>,
    /// Ledger key of this session (unique per request, see the module doc of `billing`).
    id: String,
    client: std::sync::Arc<str>,
    /// `None`: unpriced model, nothing is charged or written.
    price: Option<Price>,
    estimate: Estimate,
    /// Amount debited (and, unless `offline`, written as a precharge entry).
    precharged: i64,
    /// Admitted from the cached balance while the shared database was unreachable: no
    /// precharge row exists, so the settle carries the full cost and a refund writes nothing.
    offline: bool,
    /// The client has no quota: its settle, the session's only entry, may be folded into
    /// the client's totals by the SQLite writer (`LedgerEntry::foldable`).
    unlimited: bool,
}

/// One request's billing; see the module doc.
pub struct Session {
    open: Option<Open>,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// Settled at this cost (micro-credits).
    Settled(i64),
    /// This pre-charged amount was returned.
    Refunded(i64),
}

impl Session {
    pub(crate) fn new(
        ledger: Arc<Ledger>,
        account: Arc<Account>,
        id: String,
        client: std::sync::Arc<str>,
        price: Option<Price>,
        estimate: Estimate,
        precharged: i64,
    ) -> Session {
        Session {
            open: Some(Open {
                ledger,
                account,
                id,
                client,
                price,
                estimate,
                precharged,
                offline: false,
                unlimited: false,
            }),
        }
    }

    /// Marks a session admitted without a precharge row (see `Open::offline`).
    pub(crate) fn offline(mut self) -> Session {
        if let Some(o) = self.open.as_mut() {
            o.offline = true;
        }
        self
    }

    /// Marks the session of a client without a quota (see `Open::unlimited`).
    pub(crate) fn unlimited(mut self, yes: bool) -> Session {
        if let Some(o) = self.open.as_mut() {
            o.unlimited = yes;
        }
        self
    }

    /// The ledger key of this session.
    pub fn id(&self) -> &str {
        self.open.as_ref().map_or("", |o| o.id.as_str())
    }

    /// Micro-credits pre-charged (0 for trusted clients and unpriced models).
    pub fn precharged(&self) -> i64 {
        self.open.as_ref().map_or(0, |o| o.precharged)
    }

    /// Success: charge the real usage. A usage with no tokens at all (the upstream reported
    /// none) is charged as the estimated prompt with no completion. Returns the cost.
    pub fn settle(mut self, usage: &Usage) -> Closed {
        match self.open.take() {
            Some(o) => o.settle(usage),
            None => Closed::Settled(0),
        }
    }

    /// Every attempt failed: return the pre-charge.
    pub fn refund(mut self) -> Closed {
        match self.open.take() {
            Some(o) => o.refund(),
            None => Closed::Refunded(0),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(o) = self.open.take() {
            tracing::warn!(session = %o.id, client = %o.client,
                "billing session ended without settle or refund: refunding");
            o.refund();
        }
    }
}

impl Open {
    /// The session's last ledger entry: its id and client move into it (no copies).
    fn into_entry(self, kind: LedgerKind, amount: i64) -> (Arc<Ledger>, LedgerEntry) {
        let entry = LedgerEntry {
            request_id: self.id,
            client: self.client,
            kind,
            amount,
            ts_ms: now_ms(),
            foldable: false,
        };
        (self.ledger, entry)
    }

    fn settle(self, usage: &Usage) -> Closed {
        let Some(p) = self.price else {
            return Closed::Settled(0);
        };
        let billed = if usage.is_zero() {
            Usage {
                prompt_tokens: self.estimate.prompt_tokens,
                ..Usage::default()
            }
        } else {
            *usage
        };
        let actual = price::cost(&p, &billed);
        let delta = actual.saturating_sub(self.precharged);
        self.account.adjust(delta);
        // A session that wrote no precharge and costs nothing leaves no trace; one admitted
        // offline has no precharge row, so its settle is the whole cost.
        let wrote_precharge = self.precharged > 0 && !self.offline;
        self.ledger.count_charged(&self.client, actual);
        if wrote_precharge || actual > 0 {
            let amount = if self.offline { actual } else { delta };
            let foldable = self.unlimited && !wrote_precharge;
            let (ledger, mut entry) = self.into_entry(LedgerKind::Settle, amount);
            entry.foldable = foldable;
            ledger.send(entry);
        }
        Closed::Settled(actual)
    }

    fn refund(self) -> Closed {
        if self.precharged > 0 {
            self.account.refund(self.precharged);
            self.ledger.count_refunded(&self.client, self.precharged);
            let precharged = self.precharged;
            if !self.offline {
                let (ledger, entry) = self.into_entry(LedgerKind::Refund, precharged);
                ledger.send(entry);
            }
            return Closed::Refunded(precharged);
        }
        Closed::Refunded(self.precharged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(precharged: i64) -> (Store, Arc<Ledger>, Arc<Account>, Session) {
        let store = Store::open(":memory:").unwrap();
        let ledger = Arc::new(Ledger::new(store.clone()));
        let account = Arc::new(Account::default());
        account.try_debit(precharged, Some(1_000_000)).unwrap();
        let est = Estimate {
            prompt_tokens: 5,
            completion_tokens: 10,
        };
        let price = Price {
            input: 100.0,
            output: 1000.0,
            cache_read: None,
            cache_write: None,
            max_output: None,
        };
        let session = Session::new(
            ledger.clone(),
            account.clone(),
            "req-1/0".into(),
            "alice".into(),
            Some(price),
            est,
            precharged,
        );
        (store, ledger, account, session)
    }

    async fn entries(store: &Store) -> Vec<(LedgerKind, i64)> {
        // Ledger writes go out from spawned tasks: let them enqueue before flushing.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        store.flush().await.unwrap();
        store
            .ledger_for_request("req-1/0")
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.amount))
            .collect()
    }

    #[tokio::test]
    async fn settle_charges_the_difference_once() {
        let (store, _l, account, s) = fixture(10_500);
        let usage = Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
            cached_tokens: 4,
            cache_write_tokens: 0,
            ..Default::default()
        };
        assert_eq!(s.settle(&usage), Closed::Settled(4_000));
        assert_eq!(account.charged(), 4_000);
        assert_eq!(account.refunded(), 0);
        assert_eq!(entries(&store).await, vec![(LedgerKind::Settle, -6_500)]);
    }

    #[tokio::test]
    async fn refund_returns_the_precharge_and_drop_refunds() {
        let (store, _l, account, s) = fixture(10_500);
        assert_eq!(s.refund(), Closed::Refunded(10_500));
        assert_eq!((account.charged(), account.refunded()), (0, 10_500));
        assert_eq!(entries(&store).await, vec![(LedgerKind::Refund, 10_500)]);

        let (store, _l, account, s) = fixture(777);
        drop(s);
        assert_eq!((account.charged(), account.refunded()), (0, 777));
        assert_eq!(entries(&store).await, vec![(LedgerKind::Refund, 777)]);
    }

    #[tokio::test]
    async fn trusted_session_pays_everything_at_settle() {
        let (store, _l, account, s) = fixture(0);
        let usage = Usage {
            prompt_tokens: 1,
            completion_tokens: 1,
            cached_tokens: 0,
            cache_write_tokens: 0,
            ..Default::default()
        };
        assert_eq!(s.settle(&usage), Closed::Settled(1_100));
        assert_eq!(account.charged(), 1_100);
        assert_eq!(entries(&store).await, vec![(LedgerKind::Settle, 1_100)]);
        let (store, _l, account, s) = fixture(0);
        assert_eq!(s.refund(), Closed::Refunded(0));
        assert_eq!(account.refunded(), 0);
        assert!(entries(&store).await.is_empty());
    }

    #[tokio::test]
    async fn missing_usage_charges_the_estimated_prompt() {
        let (_store, _l, account, s) = fixture(10_500);
        assert_eq!(s.settle(&Usage::default()), Closed::Settled(500));
        assert_eq!(account.charged(), 500);
    }

    /// R17.2 fail_open: a session admitted from the cached balance has no precharge row, so
    /// its settle carries the whole cost and its refund writes nothing.
    #[tokio::test]
    async fn an_offline_session_settles_the_whole_cost_and_refunds_silently() {
        let (store, _l, account, session) = fixture(10_500);
        let session = session.offline();
        let usage = Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
            cached_tokens: 4,
            cache_write_tokens: 0,
            ..Default::default()
        };
        assert_eq!(session.settle(&usage), Closed::Settled(4_000));
        assert_eq!(account.charged(), 4_000);
        assert_eq!(entries(&store).await, vec![(LedgerKind::Settle, 4_000)]);

        let (store, _l, account, session) = fixture(10_500);
        assert_eq!(session.offline().refund(), Closed::Refunded(10_500));
        assert_eq!(account.charged(), 0);
        assert!(entries(&store).await.is_empty());
    }

    #[test]
    fn drop_outside_a_runtime_still_writes_the_refund() {
        let (store, _l, account, s) = fixture(42);
        drop(s);
        assert_eq!(account.refunded(), 42);
        let rt = tokio::runtime::Runtime::new().unwrap();
        assert_eq!(rt.block_on(entries(&store)), vec![(LedgerKind::Refund, 42)]);
    }
}
