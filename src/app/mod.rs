//! Start-up order, signals (SIGHUP reload, SIGTERM drain) and systemd notification (R13).
pub mod reload;
pub mod series;
pub mod tls;
pub mod watch;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::admin::reload_status::ConfigStatus;
use crate::config;
use crate::http::server;
use crate::relay::gateway::Gateway;
use crate::store::Store;

/// Addresses the servers actually bound (port 0 resolves here).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub listen: SocketAddr,
    pub admin: SocketAddr,
}

/// A running gateway (used by `serve` and by in-process tests).
pub struct Running {
    pub gateway: Arc<Gateway>,
    pub bound: Bound,
    /// Generation, last reload and its error (`GET /admin/config`).
    pub status: Arc<ConfigStatus>,
    /// Live state shared with other replicas (`shared.redis`), when configured.
    pub shared: Option<crate::shared::Shared>,
    shutdown: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Dropped (with the `Running`) it ends the serving threads' runtimes, which run what
    /// the requests spawned until then (`http::cores`).
    _serving: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// Stop accepting, drain in-flight requests (up to `timeouts.drain`), flush the store.
    pub async fn shutdown(self) {
        self.gateway
            .draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let _ = self.gateway.store.flush().await;
    }
}

/// Load the config, open storage, bind both listeners and start serving on the caller's
/// runtime (the in-process tests).
pub async fn start(config_path: &Path) -> anyhow::Result<Running> {
    start_on(config_path, 0).await
}

/// `start`, with clients served on `threads` serving threads (`http::cores`; 0 = on the
/// caller's runtime).
pub async fn start_on(config_path: &Path, threads: usize) -> anyhow::Result<Running> {
    // First of all, before any listener is bound: a SIGHUP must never meet the default
    // action (exit) once a client can connect.
    let hup = reload::hangup();
    let text = config::read(config_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let cfg = config::load_text(&text, config_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Both listeners are bound before anything is written: a port in use is reported
    // before the database (or any other file) is created.
    let listener = bind("listen", cfg.listen).await?;
    let admin = bind("admin.listen", cfg.admin.listen).await?;
    let (certs, tls) = match &cfg.tls {
        Some(t) => {
            let (store, acceptor) = tls::CertStore::open(t).map_err(|e| anyhow::anyhow!(e))?;
            (Some(store), Some(acceptor))
        }
        None => (None, None),
    };
    let metrics = crate::telemetry::install();
    let store = open_store(&cfg.storage).await?;
    let bound = Bound {
        listen: listener.local_addr()?,
        admin: admin.local_addr()?,
    };
    series::register_config(&cfg);
    let fail_open = cfg.shared.fail_open;
    let otlp = cfg.telemetry.otlp.clone();
    let gateway = Gateway::new(cfg, store, metrics)?;
    if let Some(o) = otlp {
        // R20.1: traces leave through a bounded queue; the exporter task runs until the
        // gateway is dropped.
        let traces = crate::telemetry::otlp::Traces::start(&o).map_err(|e| anyhow::anyhow!(e))?;
        tracing::info!(endpoint = %o.endpoint, sample_ratio = o.sample_ratio, "OTLP traces on");
        let _ = gateway.request_metrics.traces.set(traces);
    }
    gateway.billing.set_fail_open(fail_open);
    restore(&gateway).await?;
    let status = Arc::new(ConfigStatus::new(config_path, gateway.generation()));
    let reloader = Arc::new(reload::Reloader::new(
        config_path,
        gateway.clone(),
        status.clone(),
        certs,
        reload::fingerprint(&text),
    ));
    let watcher = watch::install(reloader, hup);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let (shared, shared_task) = start_shared(&gateway, rx.clone())?;
    let views = crate::admin::Views {
        config: status.clone(),
        shared: shared.clone(),
    };
    let (serving, finished) = tokio::sync::watch::channel(false);
    let servers = Servers {
        listener,
        admin,
        tls,
        threads,
        finished,
    };
    let mut tasks = spawn_tasks(&gateway, servers, views, watcher, rx);
    tasks.extend(shared_task);
    tracing::info!(listen = %bound.listen, admin = %bound.admin, "switchyard ready");
    Ok(Running {
        gateway,
        bound,
        status,
        shared,
        shutdown: tx,
        tasks,
        _serving: serving,
    })
}

/// Durable state back into memory before serving: disabled channels and keys, balances
/// (precharges a dead process left are refunded), sticky bindings.
async fn restore(gateway: &Arc<Gateway>) -> anyhow::Result<()> {
    crate::state::restore::restore(&gateway.store, &gateway.snapshot()).await;
    let recovered = gateway
        .billing
        .recover()
        .await
        .map_err(|e| anyhow::anyhow!("billing recovery: {e}"))?;
    tracing::info!(
        clients = recovered.clients,
        refunded = recovered.refunded,
        "balances rebuilt from the ledger"
    );
    crate::affinity::persist::restore(&gateway.bindings, &gateway.store).await;
    Ok(())
}

/// The two bound listeners, the client listener's TLS and its serving threads.
struct Servers {
    listener: TcpListener,
    admin: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    threads: usize,
    finished: tokio::sync::watch::Receiver<bool>,
}

/// The long-lived tasks: both listeners, the config watcher, probes, persistence and
/// retention, and the lease keeper with PostgreSQL. Each stops when `rx` says so.
fn spawn_tasks(
    gateway: &Arc<Gateway>,
    servers: Servers,
    views: crate::admin::Views,
    watcher: watch::Installed,
    rx: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(crate::affinity::persist::run(
            gateway.bindings.clone(),
            gateway.store.clone(),
            rx.clone(),
        )),
        tokio::spawn(server::serve_on(
            servers.listener,
            gateway.clone(),
            servers.tls,
            rx.clone(),
            servers.threads,
            servers.finished,
        )),
        tokio::spawn(crate::store::retention::run(
            gateway.store.clone(),
            retention_of(gateway.clone()),
            rx.clone(),
        )),
        tokio::spawn(crate::admin::serve(
            servers.admin,
            gateway.clone(),
            views,
            rx.clone(),
        )),
        tokio::spawn(watcher.run(rx.clone())),
        tokio::spawn(crate::state::probe::run(gateway.clone(), rx.clone())),
        tokio::spawn(crate::relay::prober::run(gateway.clone(), rx.clone())),
        tokio::spawn(gateway.clone().sweep_limits(rx.clone())),
    ];
    if gateway.billing.is_shared() {
        let gw = gateway.clone();
        tasks.push(tokio::spawn(
            async move { gw.billing.keep_leases(rx).await },
        ));
    }
    tasks
}

/// SQLite at `storage.path`, or PostgreSQL at `storage.url` (several replicas, R17).
async fn open_store(s: &config::model::Storage) -> anyhow::Result<Store> {
    let Some(url) = &s.url else {
        let opts = crate::store::StoreOptions {
            queue_capacity: s.queue_capacity,
            ..Default::default()
        };
        return Store::open_with(&s.path, opts)
            .map_err(|e| anyhow::anyhow!("storage.path {}: {e}", s.path));
    };
    let opts = crate::store::PgOptions {
        queue_capacity: s.queue_capacity,
        lease_ttl: s.lease_ttl,
        pool_size: s.pool_size,
        timeout: s.pool_timeout,
        debit_batch: s.debit_batch,
        ..Default::default()
    };
    // The URL may hold a password: errors name the key, never the value.
    Store::open_postgres(url.expose(), opts).await.map_err(|e| {
        anyhow::anyhow!("storage.url: cannot use PostgreSQL: {e}; check that it runs and that the URL's user may create tables in the database")
    })
}

/// Start sharing live state through Redis when `shared.redis` is set (R17.1).
fn start_shared(
    gw: &Arc<Gateway>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<(
    Option<crate::shared::Shared>,
    Option<tokio::task::JoinHandle<()>>,
)> {
    let cfg = gw.snapshot().table.config.shared.clone();
    let Some(url) = cfg.redis else {
        return Ok((None, None));
    };
    let (g1, g2) = (gw.clone(), gw.clone());
    let wiring = crate::shared::Wiring {
        snapshot: Arc::new(move || g1.snapshot()),
        bindings: gw.bindings.clone(),
        store: gw.store.clone(),
        budget: Arc::new(move || g2.budget()),
        replicas: cfg.replicas,
        resync: crate::shared::RESYNC,
    };
    let (shared, task) = crate::shared::Shared::start(url.expose(), wiring, &gw.registry, shutdown)
        .map_err(|e| anyhow::anyhow!("shared.redis: {e}"))?;
    // R15, R17.1: rate-limit counters and upstream key cool-downs are shared too.
    gw.share_limits(shared.limit_store());
    shared.attach_key_cooldowns(gw.key_cooldowns.clone());
    // R10.5, R17.1: task bindings reach the other replicas at once.
    crate::relay::intake::task::share(gw, &shared);
    // R19.2: one active prober per breaker and interval across the deployment.
    let _ = gw.shared.set(shared.clone());
    tracing::info!(replicas = cfg.replicas, "sharing live state through Redis");
    Ok((Some(shared), Some(task)))
}

/// The live `storage.request_log` limits, read by the retention task before each round.
fn retention_of(gw: Arc<Gateway>) -> impl Fn() -> crate::store::retention::Retention {
    move || {
        let request_log = gw.snapshot().table.config.storage.request_log;
        crate::store::retention::Retention {
            max_age: request_log.max_age,
            max_rows: request_log.max_rows,
        }
    }
}

/// Bind `addr` for the setting `key`, with an error that says what to do.
async fn bind(key: &str, addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "{key} {addr}: the address is already in use (is another switchyard running?); stop what holds it or change `{key}`"
        ),
        std::io::ErrorKind::AddrNotAvailable => anyhow::anyhow!(
            "{key} {addr}: no network interface has this address; change `{key}`"
        ),
        std::io::ErrorKind::PermissionDenied => anyhow::anyhow!(
            "{key} {addr}: permission denied (ports below 1024 need CAP_NET_BIND_SERVICE); change `{key}`"
        ),
        _ => anyhow::anyhow!("{key} {addr}: cannot listen: {e}"),
    })
}

/// `switchyard serve`: run until SIGTERM/SIGINT, clients served on `threads` serving
/// threads.
pub async fn serve(config_path: &Path, threads: usize) -> anyhow::Result<()> {
    // Listen for SIGTERM before serving, so a stop during start-up still drains.
    let stop = stop_signal();
    let running = start_on(config_path, threads).await?;
    let status = format!("config generation {} live", running.gateway.generation());
    let _ = sd_notify::notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&status),
    ]);
    wait_for_stop(stop).await;
    tracing::info!("shutting down: draining in-flight requests");
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    running.shutdown().await;
    Ok(())
}

#[cfg(unix)]
type StopSignal = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type StopSignal = ();

#[cfg(unix)]
fn stop_signal() -> StopSignal {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::terminate()).ok()
}

#[cfg(not(unix))]
fn stop_signal() -> StopSignal {}

#[cfg(unix)]
async fn wait_for_stop(term: StopSignal) {
    let Some(mut term) = term else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(not(unix))]
async fn wait_for_stop(_term: StopSignal) {
    let _ = tokio::signal::ctrl_c().await;
}
