//! Quota and billing (R11): in-memory balances debited atomically, one
//! billing session per request, and a SQLite ledger that makes both crash-safe.
//!
//! # Units and prices
//! * Quotas (`clients.<name>.quota`) are whole credits; `None` is unlimited. Prices
//!   (`pricing.<public model>: {input, output}`) are credits per million tokens.
//! * Every amount is kept as an integer number of **micro-credits** (`i64`): a price of one
//!   credit per million tokens is one micro-credit per token, so a request costs
//!   `input × prompt_tokens + output × completion_tokens` micro-credits, rounded once.
//! * Usage is normalised per wire format (`wire::usage`): `prompt_tokens` counts every input
//!   token, cache reads and cache writes included (Anthropic's `input_tokens` excludes them,
//!   OpenAI's `prompt_tokens` includes its cached tokens). Cache reads cost
//!   `pricing.<model>.cache_read` and cache writes `cache_write` per million when given,
//!   else the input price.
//! * A model without a `pricing` entry is free: nothing is debited or written, and the
//!   first request for it is logged at warn level.
//!
//! # Lifecycle of a request (R11.1)
//! 1. Before the attempt loop, [`Billing::begin`] debits an estimate — prompt = body bytes
//!    / 4, completion = `max_completion_tokens` / `max_tokens` / `max_output_tokens` from
//!    the body, else `pricing.<model>.max_output` or 1024 (`price::default_output`; the
//!    relay then sends that limit upstream, B-token-estimate) — and writes a precharge entry. A client whose balance cannot
//!    cover the estimate gets `402 insufficient_quota` in its wire format and no upstream
//!    is called. Retries and failovers reuse the one [`Session`].
//! 2. On success [`Session::settle`] charges the real usage: the settle entry holds
//!    `actual − estimate` (the difference is charged or returned). A success whose usage
//!    reports no tokens at all is charged as the estimated prompt without completion. A
//!    stream ended by the client settles with the usage relayed so far.
//! 3. When every attempt failed, [`Session::refund`] returns the precharge. Both consume the
//!    session; a session dropped without either refunds in `Drop`, so a panic or an early
//!    return never keeps a precharge.
//! 4. Cancellation (B-cancel-guards): the guard that gives a debit back exists before the first
//!    `.await` after taking it. Locally the [`Session`] is built before the precharge entry
//!    waits for room in the writer queue (the wait runs in a task of its own, so the entry
//!    is never lost); with PostgreSQL a request cancelled during its debit statement leaves
//!    the lease-renewal set and queues its refund (`shared.rs`), so a precharge that commits
//!    after the client left is swept when its lease expires instead of renewed for good.
//!
//! # Atomic debit and the overshoot bound (R11.3)
//! The admission debit is one compare-and-swap loop on the client's `AtomicI64` that
//! refuses when `quota − charged < estimate`; it is never check-then-deduct, so concurrent
//! requests can never together take more than the quota. A settle is never refused (the
//! upstream has done the work): when the real cost exceeds the estimate the difference is
//! charged anyway, so a balance can go below zero only through settle overshoot, by at
//! most the sum of `actual − estimate` over the requests in flight at that moment (bounded
//! per request by the caller's own `max_tokens`, or by the default the gateway sends
//! upstream in its place — `max_output` or 1024 — when the upstream honours it). A balance below any estimate refuses every later request.
//!
//! # Unlimited clients
//! A client without a quota has nothing to protect, so it is not precharged: like a trusted
//! client it pays the full cost at settle (one ledger entry per request instead of two) and
//! a failed request leaves no entry at all.
//!
//! # Trusted clients (R11.4)
//! `clients.<name>.trusted: true` skips the precharge and pays the full cost at settle. A
//! trusted client with a quota is still refused once its balance is zero or below; its
//! overshoot bound is the full cost of its requests in flight.
//!
//! # Crash safety (R11.2)
//! Every precharge, settle and refund is a ledger entry sent through the store writer's
//! durable path (never dropped on a full queue). The precharge is queued before the first
//! upstream attempt; settle and refund are queued from a task off the response path. The
//! ledger is keyed by a session id `<request id>/<random>` — the request id alone can be
//! chosen by the caller (`x-request-id`) and must never merge two requests — and stores at
//! most one terminal entry per session. At start-up [`recover`] refunds every precharge
//! without a terminal entry, then sets each client's balance to `quota − net charged` from
//! the ledger. So after a `kill -9` each request is either settled (if its settle was
//! committed) or refunded — never charged twice. A settle still queued at the moment of the
//! kill (a few milliseconds) is lost together with its precharge: the request is then free.
//!
//! # Several replicas (R17)
//! With `storage.url` the balances live in PostgreSQL: the debit above becomes one conditional
//! statement there (`shared.rs`), the accounts here become a cache refreshed every second, and
//! a lease on each precharge lets a surviving replica refund the precharges of a replica that
//! died (`lease.rs`, `store::postgres::quota`).
//!
//! # Reload
//! Balances are kept per client name and the quota is read from the live config at each
//! debit: a client added on reload starts with its full quota, a changed quota changes the
//! remaining balance by exactly the difference, and a removed client's history is kept in
//! case it returns.

mod balances;
mod lease;
pub mod price;
mod recover;
mod session;
mod shared;

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

pub use balances::{Account, Balances, Refused};
pub use recover::{recover, Recovered};
pub use session::{Closed, Session};

use crate::config::model::{Client, Price};
use crate::error::GatewayError;
use crate::store::{now_ms, LedgerEntry, LedgerKind, Quota, Store, StoreError};
use crate::telemetry;
use session::Ledger;

/// Most unpriced model names remembered for the once-per-model warning.
pub const UNPRICED_NOTES: usize = 256;

/// The process-wide billing state (one per gateway).
pub struct Billing {
    balances: Balances,
    ledger: Arc<Ledger>,
    unpriced_seen: ArcSwap<HashSet<String>>,
    /// PostgreSQL (`storage.url`): balances live in the database, shared by the replicas;
    /// `balances` is then this replica's cache of them.
    shared: Option<Quota>,
    /// `shared.fail_open`: admit quota-limited clients from the cache while the database is
    /// unreachable.
    fail_open: AtomicBool,
}

/// A client's account as the admin API shows it (micro-credits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountView {
    /// `None`: unlimited.
    pub quota: Option<i64>,
    pub charged: i64,
    pub refunded: i64,
    /// `None`: unlimited.
    pub remaining: Option<i64>,
}

impl Billing {
    pub fn new(store: Store) -> Billing {
        Billing {
            balances: Balances::default(),
            shared: store.quota(),
            ledger: Arc::new(Ledger::new(store)),
            unpriced_seen: ArcSwap::default(),
            fail_open: AtomicBool::new(false),
        }
    }

    /// Apply `shared.fail_open` (start-up and every reload).
    pub fn set_fail_open(&self, on: bool) {
        self.fail_open.store(on, Ordering::Relaxed);
    }

    /// Balances are shared through PostgreSQL (run [`Billing::keep_leases`] then).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Refund dangling precharges and load balances from the ledger (start-up).
    pub async fn recover(&self) -> Result<Recovered, StoreError> {
        recover(self).await
    }

    /// Open the billing session of one request: debit the estimate (unless the client is
    /// trusted or the model unpriced) and queue the precharge entry. `Err` is the 402 to
    /// answer; no upstream may then be called.
    pub async fn begin(
        &self,
        client: &Client,
        pricing: &BTreeMap<String, Price>,
        model: &str,
        estimate: price::Estimate,
        request_id: &str,
    ) -> Result<Session, GatewayError> {
        let account = self.balances.account(&client.name);
        // Sized once: `{request_id}/` and 16 hex digits.
        let mut id = String::with_capacity(request_id.len() + 17);
        let _ = write!(id, "{request_id}/{:016x}", fastrand::u64(..));
        let Some(p) = pricing.get(model).copied() else {
            self.note_unpriced(model);
            return Ok(Session::new(
                self.ledger.clone(),
                account,
                id,
                client.name.clone(),
                None,
                estimate,
                0,
            ));
        };
        let limit = client.quota.map(price::quota_micro);
        if limit.is_some() && self.ledger.store.is_full() {
            // Fail closed: a charge that cannot be written could be lost.
            return Err(GatewayError::new(
                http::StatusCode::SERVICE_UNAVAILABLE,
                "storage_full",
                "api_error",
                "quota accounting is paused because the gateway cannot write its ledger (disk full); retry later",
            ));
        }
        // Trusted and unlimited clients are not precharged: an unlimited one can never be
        // refused, so a precharge would only cost a ledger row; both pay at settle.
        let amount = if client.trusted || limit.is_none() {
            0
        } else {
            price::cost(&p, &estimate.usage())
        };
        if let (Some(q), Some(l), true) = (&self.shared, limit, amount > 0) {
            let open = shared::Open {
                client,
                price: p,
                estimate,
                id,
                account,
                amount,
                limit: l,
            };
            // Boxed: only shared mode pays for the PostgreSQL debit's state.
            return Box::pin(self.begin_shared(q, open)).await;
        }
        let pending = Pending {
            client,
            price: p,
            estimate,
            id,
            account,
            amount,
            limit,
        };
        self.debit_local(pending).await
    }

    /// The single-process debit (R11.3): one conditional atomic update of the client's
    /// in-memory account, then the precharge entry through the durable send.
    async fn debit_local(&self, pending: Pending<'_>) -> Result<Session, GatewayError> {
        let Pending {
            client,
            price: p,
            estimate,
            id,
            account,
            amount,
            limit,
        } = pending;
        let refused = if client.trusted {
            // No debit: only refuse a trusted client that has nothing left at all.
            limit
                .map(|l| l.saturating_sub(account.charged()))
                .filter(|r| *r <= 0)
                .map(|remaining| Refused { remaining })
        } else {
            account.try_debit(amount, limit).err()
        };
        if let Some(r) = refused {
            telemetry::quota().rejected(&client.name);
            tracing::info!(client = %client.name, need_micro = amount,
                remaining_micro = r.remaining, "request refused: quota exhausted");
            return Err(GatewayError::quota_exceeded(
                price::credits(amount),
                price::credits(r.remaining.max(0)),
            ));
        }
        let entry = (amount > 0).then(|| LedgerEntry {
            request_id: id.clone(),
            client: client.name.clone(),
            kind: LedgerKind::Precharge,
            amount,
            ts_ms: now_ms(),
            foldable: false,
        });
        // The session (whose Drop refunds) exists before the first await (B-cancel-guards), and the
        // precharge is queued by a task the request cannot cancel: a client that leaves while
        // the writer queue is full gets its debit back, and the ledger has both entries.
        let session = Session::new(
            self.ledger.clone(),
            account,
            id,
            client.name.clone(),
            Some(p),
            estimate,
            amount,
        )
        .unlimited(limit.is_none());
        if let Some(entry) = entry {
            self.ledger.queue(entry).await;
        }
        Ok(session)
    }

    /// The account of `client` with its live quota.
    pub fn view(&self, client: &Client) -> AccountView {
        let (charged, refunded) = self
            .balances
            .get(&client.name)
            .map_or((0, 0), |a| (a.charged(), a.refunded()));
        let quota = client.quota.map(price::quota_micro);
        AccountView {
            quota,
            charged,
            refunded,
            remaining: quota.map(|q| q.saturating_sub(charged)),
        }
    }

    /// Unpriced model names remembered so far (at most [`UNPRICED_NOTES`]).
    pub fn unpriced_noted(&self) -> usize {
        self.unpriced_seen.load().len()
    }

    /// Warn once per unpriced model name. The names can come from clients (a pass-through
    /// path routes any `model` string), so at most [`UNPRICED_NOTES`] are remembered; past
    /// that nothing more is stored or logged (no client-grown memory).
    fn note_unpriced(&self, model: &str) {
        let seen = self.unpriced_seen.load();
        if seen.contains(model) || seen.len() >= UNPRICED_NOTES {
            return;
        }
        drop(seen);
        let mut first = false;
        self.unpriced_seen.rcu(|s| {
            first = !s.contains(model) && s.len() < UNPRICED_NOTES;
            if !first {
                return HashSet::clone(s);
            }
            let mut next = HashSet::clone(s);
            next.insert(model.to_string());
            next
        });
        if first {
            tracing::warn!(model, "model has no `pricing` entry: its requests are free");
        }
    }
}

/// A precharge about to be debited in this process.
struct Pending<'a> {
    client: &'a Client,
    price: Price,
    estimate: price::Estimate,
    id: String,
    account: Arc<balances::Account>,
    amount: i64,
    limit: Option<i64>,
}
