//! In-memory per-client accounts: net charge and refunds as atomics, debited by one
//! compare-and-swap loop that refuses when the balance cannot cover the amount (R11.3).
//!
//! An account keeps what the client has been charged, not the balance itself: the balance
//! is `quota − charged`, with the quota read from the live config at each debit. A reload
//! that changes a quota therefore changes the remaining balance by exactly the difference,
//! and a client added on reload starts with an empty account. Accounts are keyed by client
//! name and are never removed: a client removed and later re-added keeps its history.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::fastmap::FastMap;
use crate::store::LedgerTotals;

/// One client's running totals, in micro-credits.
#[derive(Debug, Default)]
pub struct Account {
    /// Net charge: precharges + settle deltas − refunds (matches `LedgerTotals::charged`).
    charged: AtomicI64,
    /// Sum of refunds.
    refunded: AtomicI64,
}

/// A debit the balance could not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Balance left at the moment of the refusal (micro-credits).
    pub remaining: i64,
}

impl Account {
    pub fn new(totals: LedgerTotals) -> Account {
        Account {
            charged: AtomicI64::new(totals.charged),
            refunded: AtomicI64::new(totals.refunded),
        }
    }

    /// Debits `amount` if `limit − charged ≥ amount` (one CAS loop, never check-then-deduct).
    /// `limit: None` is unlimited: the debit always succeeds.
    pub fn try_debit(&self, amount: i64, limit: Option<i64>) -> Result<(), Refused> {
        let mut cur = self.charged.load(Ordering::Acquire);
        loop {
            if let Some(limit) = limit {
                let remaining = limit.saturating_sub(cur);
                if remaining < amount {
                    return Err(Refused { remaining });
                }
            }
            match self.charged.compare_exchange_weak(
                cur,
                cur.saturating_add(amount),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Replaces both totals (a cache refreshed from the shared database).
    pub fn set(&self, charged: i64, refunded: i64) {
        self.charged.store(charged, Ordering::Release);
        self.refunded.store(refunded, Ordering::Release);
    }

    /// Unconditional charge adjustment (a settle delta; may be negative).
    pub fn adjust(&self, delta: i64) {
        self.charged.fetch_add(delta, Ordering::AcqRel);
    }

    /// Returns a pre-charged amount.
    pub fn refund(&self, amount: i64) {
        self.charged.fetch_sub(amount, Ordering::AcqRel);
        self.refunded.fetch_add(amount, Ordering::AcqRel);
    }

    pub fn charged(&self) -> i64 {
        self.charged.load(Ordering::Acquire)
    }

    pub fn refunded(&self) -> i64 {
        self.refunded.load(Ordering::Acquire)
    }
}

/// Accounts by client name. Lookups are lock-free; only the first request of a new client
/// copies the map.
#[derive(Default)]
pub struct Balances {
    map: ArcSwap<FastMap<String, Arc<Account>>>,
}

impl Balances {
    /// The account of `client`, created empty on first use.
    pub fn account(&self, client: &str) -> Arc<Account> {
        if let Some(a) = self.map.load().get(client) {
            return a.clone();
        }
        let mut out = None;
        self.map.rcu(|m| {
            if let Some(a) = m.get(client) {
                out = Some(a.clone());
                return Arc::clone(m);
            }
            let account = Arc::new(Account::default());
            out = Some(account.clone());
            let mut next = FastMap::clone(m);
            next.insert(client.to_string(), account);
            Arc::new(next)
        });
        out.unwrap_or_default()
    }

    /// The account of `client` if it has one.
    pub fn get(&self, client: &str) -> Option<Arc<Account>> {
        self.map.load().get(client).cloned()
    }

    /// Sets the accounts named in `totals` (others are left as they are): a refresh of the
    /// cache from the shared database.
    pub fn sync(&self, totals: HashMap<String, LedgerTotals>) {
        for (client, t) in totals {
            self.account(&client).set(t.charged, t.refunded);
        }
    }

    /// Replaces every account with the ledger's totals (start-up, before serving).
    pub fn load(&self, totals: HashMap<String, LedgerTotals>) {
        let map = totals
            .into_iter()
            .map(|(k, t)| (k, Arc::new(Account::new(t))))
            .collect();
        self.map.store(Arc::new(map));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn debit_refuses_beyond_the_limit() {
        let account = Account::default();
        assert_eq!(account.try_debit(6, Some(10)), Ok(()));
        assert_eq!(
            account.try_debit(5, Some(10)),
            Err(Refused { remaining: 4 })
        );
        assert_eq!(account.try_debit(4, Some(10)), Ok(()));
        assert_eq!(account.charged(), 10);
        account.refund(6);
        assert_eq!((account.charged(), account.refunded()), (4, 6));
        assert_eq!(account.try_debit(1_000, None), Ok(()));
    }

    #[test]
    fn concurrent_debits_admit_exactly_what_the_limit_affords() {
        let account = Arc::new(Account::default());
        let admitted = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(std::sync::Barrier::new(40));
        let threads: Vec<_> = (0..40)
            .map(|_| {
                let (account, admitted, barrier) =
                    (account.clone(), admitted.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..5 {
                        if account.try_debit(7, Some(70)).is_ok() {
                            admitted.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::SeqCst), 10);
        assert_eq!(account.charged(), 70);
    }

    #[test]
    fn accounts_are_created_once_and_loaded_from_totals() {
        let balances = Balances::default();
        let alice = balances.account("alice");
        alice.adjust(5);
        assert_eq!(balances.account("alice").charged(), 5);
        assert!(balances.get("bob").is_none());
        let mut totals = HashMap::new();
        totals.insert(
            "bob".to_string(),
            LedgerTotals {
                charged: 7,
                refunded: 2,
            },
        );
        balances.load(totals);
        assert_eq!(
            balances.get("bob").map(|a| (a.charged(), a.refunded())),
            Some((7, 2))
        );
        assert!(balances.get("alice").is_none());
    }
}
