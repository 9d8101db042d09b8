//! `Gateway`: the process-wide context every request sees — the live snapshot (arc-swap),
//! the runtime-state registry, the upstream client, the store, the retry budget, and the
//! rate limiter with the upstream keys' learned cool-downs (R15).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::model::Config;
use crate::limits::Limiter;
use crate::routing::budget::RetryBudget;
use crate::routing::compile::compile;
use crate::shared::limits::LimitStore;
use crate::state::{Registry, Snapshot};
use crate::store::Store;
use crate::telemetry;

use crate::upstream::Upstream;

pub struct Gateway {
    live: ArcSwap<Snapshot>,
    /// Sticky bindings, keyed by key hash, valued by channel name (R8.3).
    pub bindings: Arc<crate::affinity::Bindings>,
    pub registry: Registry,
    pub upstream: Upstream,
    pub store: Store,
    /// Balances and billing sessions (R11).
    pub billing: crate::billing::Billing,
    budget: ArcSwap<RetryBudget>,
    pub metrics: Option<PrometheusHandle>,
    /// Set on SIGTERM: new connections are refused, in-flight ones finish.
    pub draining: AtomicBool,
    generation: AtomicU64,
    swapping: std::sync::Mutex<()>,
    /// Task id → accepting channel, in front of SQLite (R10.5).
    pub tasks: crate::relay::intake::task_cache::TaskCache,
    /// Pre-registered request-level metric handles (hot path).
    pub request_metrics: Arc<telemetry::RequestMetrics>,
    /// Client and upstream-key rate limits (R15.1, R15.3): local, or shared through Redis
    /// once `app` hands it the shared store ([`Gateway::share_limits`]).
    limiter: ArcSwap<Limiter<LimitStore>>,
    /// Upstream keys held back by their rate-limit answers (R15.3).
    pub key_cooldowns: Arc<crate::limits::KeyCooldowns>,
    /// The shared-state runtime, once `app` started one (`shared.redis`, R17): whose turn
    /// it is to send an active probe (R19.2).
    pub shared: std::sync::OnceLock<crate::shared::Shared>,
}

impl Gateway {
    pub fn new(
        config: Config,
        store: Store,
        metrics: Option<PrometheusHandle>,
    ) -> std::io::Result<Arc<Gateway>> {
        let registry = Registry::default();
        let budget = budget_for(&config);
        let snap = Snapshot::new(compile(Arc::new(config), 1), &registry);
        metrics::gauge!(telemetry::CONFIG_GENERATION).set(1.0);
        Ok(Arc::new(Gateway {
            live: ArcSwap::from_pointee(snap),
            bindings: Arc::default(),
            registry,
            upstream: Upstream::new()?,
            billing: crate::billing::Billing::new(store.clone()),
            store,
            budget: ArcSwap::from_pointee(budget),
            metrics,
            draining: AtomicBool::new(false),
            generation: AtomicU64::new(1),
            swapping: std::sync::Mutex::new(()),
            tasks: crate::relay::intake::task_cache::TaskCache::default(),
            request_metrics: Arc::new(telemetry::RequestMetrics::new()),
            limiter: ArcSwap::from_pointee(Limiter::new(LimitStore::Local(Default::default()))),
            key_cooldowns: Arc::default(),
            shared: std::sync::OnceLock::new(),
        }))
    }

    /// The rate limiter (R15). An unlimited client on unlimited keys never calls this.
    pub fn limiter(&self) -> Arc<Limiter<LimitStore>> {
        self.limiter.load_full()
    }

    /// Share rate limits with the other replicas (R17.1): called once at start, before
    /// the listener accepts requests.
    pub fn share_limits(&self, store: crate::shared::limits::RedisStore) {
        let shared = LimitStore::Shared(Box::new(store));
        self.limiter.store(Arc::new(Limiter::new(shared)));
    }

    /// The snapshot a request uses from start to end (Invariant 1: one load per request).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.live.load_full()
    }

    pub fn budget(&self) -> Arc<RetryBudget> {
        self.budget.load_full()
    }

    /// Compile `config` and swap it in; in-flight requests keep the snapshot they loaded.
    /// Returns the new generation.
    pub fn swap(&self, config: Config) -> u64 {
        // Swaps are serialised, and the generation is published only after the new
        // snapshot is live: whoever sees generation N is served by table N or newer.
        let _one_at_a_time = crate::lock::lock(&self.swapping);
        let generation = self.generation.load(Ordering::SeqCst) + 1;
        let old = self.live.load();
        let rb = &config.routing.retry_budget;
        let ob = &old.table.config.routing.retry_budget;
        if rb.ratio != ob.ratio || rb.min_per_second != ob.min_per_second || rb.ttl != ob.ttl {
            self.budget.store(Arc::new(budget_for(&config)));
        }
        let snap = Snapshot::new(compile(Arc::new(config), generation), &self.registry);
        self.live.store(Arc::new(snap));
        self.generation.store(generation, Ordering::SeqCst);
        metrics::gauge!(telemetry::CONFIG_GENERATION).set(generation as f64);
        generation
    }

    /// Drop rate-limit state that counts nothing any more (R15; the maps are bounded
    /// anyway), every 30 s until `stop` says so.
    pub async fn sweep_limits(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = tokio::time::Instant::now();
                    self.limiter().sweep(now);
                    self.key_cooldowns.sweep(now);
                }
                r = stop.changed() => if r.is_err() { return },
            }
            if *stop.borrow() {
                return;
            }
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

fn budget_for(config: &Config) -> RetryBudget {
    let budget = &config.routing.retry_budget;
    RetryBudget::new(budget.ratio, budget.min_per_second, budget.ttl)
}

impl crate::state::probe::Host for Gateway {
    fn snapshot(&self) -> Arc<Snapshot> {
        Gateway::snapshot(self)
    }

    fn store(&self) -> &Store {
        &self.store
    }

    async fn list_models(
        &self,
        ch: &crate::config::model::Channel,
        key: usize,
        timeout: std::time::Duration,
    ) -> Option<u16> {
        crate::upstream::list_models(&self.upstream, ch, key, timeout).await
    }
}
