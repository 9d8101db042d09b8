//! Hot reload (R2.4): watch the config's directory (editors save by rename), debounce, and
//! reload on change or SIGHUP through one path; an invalid file keeps the old table.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};

use crate::config;
use crate::proxy::gateway::Gateway;
use crate::telemetry;

/// How long file events settle before one reload.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Reload once: parse, validate, compile, swap. Returns the new generation or the errors.
pub fn reload_now(path: &Path, gw: &Gateway) -> Result<u64, String> {
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Reloading, monotonic_now()]);
    let result = match config::load(path) {
        Ok(cfg) => {
            let generation = gw.swap(cfg);
            metrics::counter!(telemetry::CONFIG_RELOADS, "result" => "ok").increment(1);
            tracing::info!(generation, file = %path.display(), "config reloaded");
            Ok(generation)
        }
        Err(e) => {
            metrics::counter!(telemetry::CONFIG_RELOADS, "result" => "error").increment(1);
            tracing::error!(file = %path.display(), errors = %e, "config reload rejected; the previous configuration stays live");
            Err(e.to_string())
        }
    };
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
    result
}

fn monotonic_now() -> sd_notify::NotifyState<'static> {
    sd_notify::NotifyState::monotonic_usec_now().unwrap_or(sd_notify::NotifyState::Ready)
}

/// Whether a debounced event should trigger a reload: anything but reads (the watcher reports
/// our own `open` of the file; reacting to it would reload forever — ECOSYSTEM-NOTES).
fn relevant(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// The SIGHUP listener. It is installed by `start` before anything is served: until a
/// listener exists, a SIGHUP takes its default action and ends the process.
#[cfg(unix)]
pub type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
pub type Hangup = ();

#[cfg(unix)]
pub fn hangup() -> Hangup {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::hangup()).ok()
}

#[cfg(not(unix))]
pub fn hangup() -> Hangup {}

/// Run the watcher and the SIGHUP handler until shutdown.
pub async fn watch(
    path: PathBuf,
    gw: Arc<Gateway>,
    hup: Hangup,
    mut shutdown: watch::Receiver<bool>,
) {
    let (tx, mut rx) = mpsc::channel::<()>(8);
    let file_name = path.file_name().map(|f| f.to_os_string());
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let tx_w = tx.clone();
    // A raw watcher whose callback only compares a file name: the directory may also hold the
    // SQLite files, whose every write raises an event, so the per-event cost must be tiny.
    // Debouncing happens below, in one place for watcher and SIGHUP alike.
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(e) = res else { return };
        if relevant(&e.kind)
            && e.paths
                .iter()
                .any(|p| p.file_name() == file_name.as_deref())
        {
            let _ = tx_w.try_send(());
        }
    });
    let _watcher = match watcher {
        Ok(mut w) => match w.watch(&dir, RecursiveMode::NonRecursive) {
            Ok(()) => Some(w),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the config directory; reload with SIGHUP");
                None
            }
        },
        Err(e) => {
            tracing::warn!(error = %e, "file watcher unavailable; reload with SIGHUP");
            None
        }
    };
    spawn_sighup(tx, hup);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            m = rx.recv() => {
                if m.is_none() { return; }
                // Debounce: editors write a file in several steps; settle, then reload once.
                tokio::time::sleep(DEBOUNCE).await;
                while rx.try_recv().is_ok() {}
                let (p, g) = (path.clone(), gw.clone());
                let _ = tokio::task::spawn_blocking(move || reload_now(&p, &g)).await;
            }
        }
    }
}

#[cfg(unix)]
fn spawn_sighup(tx: mpsc::Sender<()>, hup: Hangup) {
    let Some(mut hup) = hup else {
        tracing::warn!("cannot listen for SIGHUP; the file watcher still reloads");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading config");
            let _ = tx.send(()).await;
        }
    });
}

#[cfg(not(unix))]
fn spawn_sighup(_tx: mpsc::Sender<()>, _hup: Hangup) {}
