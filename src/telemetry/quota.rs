//! Quota counters by client (`client` label on `QUOTA_CHARGED`, `QUOTA_REFUNDED`,
//! `QUOTA_REJECTED`), moved in whole credits from exact micro-credit sums.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use super::{QUOTA_CHARGED, QUOTA_REFUNDED, QUOTA_REJECTED};

use crate::fastmap::FastMap;

/// One client's quota counters and the exact micro-credit sums behind them.
struct ClientMeter {
    charged_micro: AtomicI64,
    refunded_micro: AtomicI64,
    charged: metrics::Counter,
    refunded: metrics::Counter,
    rejected: metrics::Counter,
}

/// The quota counters by client (`client` label). Counters move in whole credits by the
/// credits crossed by each client's exact micro-credit sum, so they never drift from it.
#[derive(Default)]
pub struct QuotaMeters {
    clients: ArcSwap<FastMap<String, Arc<ClientMeter>>>,
}

/// The process-wide quota counters (the recorder is process-wide too).
pub fn quota() -> &'static QuotaMeters {
    static QUOTA: OnceLock<QuotaMeters> = OnceLock::new();
    QUOTA.get_or_init(QuotaMeters::default)
}

impl QuotaMeters {
    fn meter(&self, client: &str) -> Arc<ClientMeter> {
        if let Some(m) = self.clients.load().get(client) {
            return m.clone();
        }
        let mut out = None;
        self.clients.rcu(|map| {
            if let Some(m) = map.get(client) {
                out = Some(m.clone());
                return Arc::clone(map);
            }
            let name = client.to_string();
            let meter = Arc::new(ClientMeter {
                charged_micro: AtomicI64::new(0),
                refunded_micro: AtomicI64::new(0),
                charged: metrics::counter!(QUOTA_CHARGED, "client" => name.clone()),
                refunded: metrics::counter!(QUOTA_REFUNDED, "client" => name.clone()),
                rejected: metrics::counter!(QUOTA_REJECTED, "client" => name),
            });
            out = Some(meter.clone());
            let mut next = FastMap::clone(map);
            next.insert(client.to_string(), meter);
            Arc::new(next)
        });
        match out {
            Some(m) => m,
            None => self.meter(client),
        }
    }

    /// Export the client's counters at 0.
    pub fn register(&self, client: &str) {
        let meter = self.meter(client);
        meter.charged.increment(0);
        meter.refunded.increment(0);
        meter.rejected.increment(0);
    }

    fn add(total: &AtomicI64, counter: &metrics::Counter, micro: i64, per_credit: i64) {
        if micro <= 0 || per_credit <= 0 {
            return;
        }
        let before = total.fetch_add(micro, Ordering::Relaxed);
        let whole = before.saturating_add(micro) / per_credit - before / per_credit;
        if whole > 0 {
            counter.increment(whole as u64);
        }
    }

    /// `micro` charged to `client` (`per_credit` micro-units make one credit).
    pub fn charged(&self, client: &str, micro: i64, per_credit: i64) {
        let meter = self.meter(client);
        Self::add(&meter.charged_micro, &meter.charged, micro, per_credit);
    }

    /// `micro` refunded to `client`.
    pub fn refunded(&self, client: &str, micro: i64, per_credit: i64) {
        let meter = self.meter(client);
        Self::add(&meter.refunded_micro, &meter.refunded, micro, per_credit);
    }

    /// One request of `client` refused for quota.
    pub fn rejected(&self, client: &str) {
        self.meter(client).rejected.increment(1);
    }
}
