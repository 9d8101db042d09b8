//! Hot reload (R2.4, B-reload-visibility): one path for the file watcher and SIGHUP.
//!
//! A reload reads the file once and compares its fingerprint with what is live: the same
//! content swaps nothing (no generation bump); a watcher event whose content equals the last
//! attempt is ignored, so one save is one reload. Otherwise the file is parsed, validated,
//! its restart-only settings are kept at their running values (each change is warned about),
//! a renewed TLS certificate is re-read, and the new table is swapped in. The outcome goes to
//! the log, to systemd (`STATUS=`), to metrics and to `GET /admin/config`; an invalid file
//! never replaces the running configuration.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::tls::CertStore;
use crate::admin::reload_status::{ConfigStatus, ReloadOutcome};
use crate::config::{self, model::Config};
use crate::relay::gateway::Gateway;
use crate::telemetry;

/// What started a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A file event (config or TLS files).
    File,
    /// SIGHUP (`systemctl reload`): always re-reads everything.
    Signal,
}

/// Fingerprint of the config file's bytes.
pub fn fingerprint(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

#[derive(Default)]
struct Seen {
    /// The content of the live table.
    live: Option<[u8; 32]>,
    /// The content of the last attempt, good or bad.
    attempted: Option<[u8; 32]>,
}

/// Reloads one config file into one gateway.
pub struct Reloader {
    path: PathBuf,
    gw: Arc<Gateway>,
    status: Arc<ConfigStatus>,
    tls: Option<Arc<CertStore>>,
    seen: Mutex<Seen>,
}

/// Settings read once at start-up: a reload that changes one keeps the running value and
/// warns. TLS certificate and key files are not among them (they are re-read); turning TLS
/// on or off is.
pub fn restart_only(live: &Config, new: &mut Config) -> Vec<String> {
    let mut keys = Vec::new();
    let mut keep = |key: &str, differs: bool| {
        if differs {
            keys.push(key.to_string());
        }
    };
    keep("listen", live.listen != new.listen);
    keep("admin.listen", live.admin.listen != new.admin.listen);
    keep("tls", live.tls.is_some() != new.tls.is_some());
    keep(
        "limits.max_connections",
        live.limits.max_connections != new.limits.max_connections,
    );
    keep("storage.path", live.storage.path != new.storage.path);
    keep("storage.url", live.storage.url != new.storage.url);
    keep(
        "storage.lease_ttl",
        live.storage.lease_ttl != new.storage.lease_ttl,
    );
    keep(
        "storage.queue_capacity",
        live.storage.queue_capacity != new.storage.queue_capacity,
    );
    keep(
        "storage.pool_size",
        live.storage.pool_size != new.storage.pool_size,
    );
    keep(
        "storage.pool_timeout",
        live.storage.pool_timeout != new.storage.pool_timeout,
    );
    keep(
        "storage.debit_batch",
        live.storage.debit_batch != new.storage.debit_batch,
    );
    keep(
        "shared.redis",
        live.shared.redis.as_ref().map(|s| s.expose())
            != new.shared.redis.as_ref().map(|s| s.expose()),
    );
    keep(
        "shared.replicas",
        live.shared.replicas != new.shared.replicas,
    );
    keep("telemetry.otlp", live.telemetry != new.telemetry);
    new.listen = live.listen;
    new.admin.listen = live.admin.listen;
    new.telemetry = live.telemetry.clone();
    if live.tls.is_some() != new.tls.is_some() {
        new.tls = live.tls.clone();
    }
    new.limits.max_connections = live.limits.max_connections;
    new.storage.path = live.storage.path.clone();
    new.storage.url = live.storage.url.clone();
    new.storage.lease_ttl = live.storage.lease_ttl;
    new.storage.queue_capacity = live.storage.queue_capacity;
    new.storage.pool_size = live.storage.pool_size;
    new.storage.pool_timeout = live.storage.pool_timeout;
    new.storage.debit_batch = live.storage.debit_batch;
    new.shared.redis = live.shared.redis.clone();
    new.shared.replicas = live.shared.replicas;
    keys
}

impl Reloader {
    /// `loaded` is the fingerprint of the text the live table was built from.
    pub fn new(
        path: &Path,
        gw: Arc<Gateway>,
        status: Arc<ConfigStatus>,
        tls: Option<Arc<CertStore>>,
        loaded: [u8; 32],
    ) -> Reloader {
        Reloader {
            path: path.to_path_buf(),
            gw,
            status,
            tls,
            seen: Mutex::new(Seen {
                live: Some(loaded),
                attempted: Some(loaded),
            }),
        }
    }

    /// The files whose change may need a reload: the config and the live TLS files.
    pub fn watched_paths(&self) -> Vec<PathBuf> {
        let mut out = vec![self.path.clone()];
        if let Some(t) = &self.gw.snapshot().table.config.tls {
            out.extend([t.cert.clone(), t.key.clone()]);
        }
        out
    }

    /// Re-read the certificate of `cfg` if it changed; errors keep the old one.
    fn refresh_tls(&self, cfg: &Config) -> Result<(), String> {
        let (Some(store), Some(files)) = (&self.tls, &cfg.tls) else {
            return Ok(());
        };
        if store.refresh(files)? {
            tracing::info!(cert = %files.cert.display(), key = %files.key.display(), "TLS certificate reloaded; new handshakes use it");
            self.status.tls_reloaded();
        }
        Ok(())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        crate::lock::lock(&self.seen)
    }

    /// Reload once. `None`: a file event that changed nothing (not a reload at all).
    pub fn reload(&self, trigger: Trigger) -> Option<ReloadOutcome> {
        let text = config::read(&self.path);
        let fp = text.as_ref().ok().map(|t| fingerprint(t));
        let live = self.gw.snapshot().table.config.clone();
        let tls_changed = match (&self.tls, &live.tls) {
            (Some(s), Some(f)) => s.changed(f),
            _ => false,
        };
        if trigger == Trigger::File && fp.is_some() && fp == self.seen().attempted && !tls_changed {
            tracing::debug!(file = %self.path.display(), "file event without a change; nothing to reload");
            return None;
        }
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Reloading, monotonic_now()]);
        let (outcome, restart) = match text {
            Err(e) => (
                ReloadOutcome::Failed {
                    error: e.to_string(),
                },
                None,
            ),
            Ok(_) if fp.is_some() && fp == self.seen().live => match self.refresh_tls(&live) {
                Ok(()) => (
                    ReloadOutcome::Unchanged {
                        generation: self.gw.generation(),
                    },
                    None,
                ),
                Err(error) => (ReloadOutcome::Failed { error }, None),
            },
            Ok(text) => self.apply(&text, &live),
        };
        {
            let mut seen = self.seen();
            seen.attempted = fp;
            if !matches!(outcome, ReloadOutcome::Failed { .. }) {
                seen.live = fp;
            }
        }
        self.report(&outcome, restart.as_deref().unwrap_or_default());
        self.status.record(&outcome, restart);
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&self.status_line(&outcome)),
        ]);
        Some(outcome)
    }

    /// Validate `text`; keep restart-only settings; re-read TLS; swap.
    fn apply(&self, text: &str, live: &Config) -> (ReloadOutcome, Option<Vec<String>>) {
        let mut cfg = match config::load_text(text, &self.path) {
            Ok(c) => c,
            Err(e) => {
                return (
                    ReloadOutcome::Failed {
                        error: e.to_string(),
                    },
                    None,
                )
            }
        };
        let restart = restart_only(live, &mut cfg);
        if let Err(error) = self.refresh_tls(&cfg) {
            return (ReloadOutcome::Failed { error }, None);
        }
        super::series::register_config(&cfg);
        self.gw.billing.set_fail_open(cfg.shared.fail_open);
        let generation = self.gw.swap(cfg);
        (ReloadOutcome::Applied { generation }, Some(restart))
    }

    fn report(&self, outcome: &ReloadOutcome, restart: &[String]) {
        telemetry::config_reload(outcome.label());
        let file = self.path.display();
        match outcome {
            ReloadOutcome::Applied { generation } => {
                tracing::info!(generation, file = %file, "config reloaded");
                for key in restart {
                    tracing::warn!(key = %key, file = %file,
                        "{key} changed in the file but takes effect only after a restart; the running value stays, the rest of the file is live");
                }
            }
            ReloadOutcome::Unchanged { generation } => {
                tracing::info!(generation, file = %file, "config file unchanged; nothing reloaded")
            }
            ReloadOutcome::Failed { error } => {
                tracing::error!(file = %file, generation = self.gw.generation(), errors = %error,
                    "config reload rejected; the previous configuration stays live")
            }
        }
    }

    /// The `STATUS=` line for systemd (one line: the first line of an error).
    fn status_line(&self, outcome: &ReloadOutcome) -> String {
        match outcome {
            ReloadOutcome::Applied { generation } => {
                let pending = self.status.view()["restart_required"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                if pending.is_empty() {
                    format!("config generation {generation} live")
                } else {
                    format!("config generation {generation} live; restart needed for: {pending}")
                }
            }
            ReloadOutcome::Unchanged { generation } => {
                format!("config generation {generation} live; file unchanged")
            }
            ReloadOutcome::Failed { error } => format!(
                "config reload failed, generation {} stays live: {}",
                self.gw.generation(),
                error.lines().next().unwrap_or_default()
            ),
        }
    }
}

fn monotonic_now() -> sd_notify::NotifyState<'static> {
    sd_notify::NotifyState::monotonic_usec_now().unwrap_or(sd_notify::NotifyState::Ready)
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

#[cfg(unix)]
pub(super) fn spawn_sighup(tx: mpsc::Sender<Trigger>, hup: Hangup) {
    let Some(mut hup) = hup else {
        tracing::warn!("cannot listen for SIGHUP; the file watcher still reloads");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading config");
            let _ = tx.send(Trigger::Signal).await;
        }
    });
}

#[cfg(not(unix))]
pub(super) fn spawn_sighup(_tx: mpsc::Sender<Trigger>, _hup: Hangup) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Config {
        let yaml = format!(
            "{extra}channels:\n  a: {{base_url: \"http://127.0.0.1:1/v1\", models: [m]}}\n"
        );
        config::load_str(&yaml, Path::new("t.yaml"), &Default::default()).unwrap()
    }

    /// R2.4, B-reload-visibility: each restart-only key is named, keeps its running value, and
    /// the rest of the new file applies; TLS file paths are not restart-only.
    #[test]
    fn restart_only_keys_are_named_and_keep_their_running_values() {
        let live = cfg("listen: 127.0.0.1:8080\n");
        let mut new = cfg("listen: 127.0.0.1:9999\nadmin: {listen: 127.0.0.1:9998}\ntls: {cert: c.pem, key: k.pem}\nlimits: {max_connections: 5, max_body_bytes: 77}\nstorage: {path: other.db, request_log: {max_rows: 3}}\n");
        let keys = restart_only(&live, &mut new);
        assert_eq!(
            keys,
            [
                "listen",
                "admin.listen",
                "tls",
                "limits.max_connections",
                "storage.path"
            ]
        );
        assert_eq!(new.listen, live.listen);
        assert_eq!(new.admin.listen, live.admin.listen);
        assert!(new.tls.is_none());
        assert_eq!(new.limits.max_connections, live.limits.max_connections);
        assert_eq!(new.storage.path, live.storage.path);
        // The rest applies.
        assert_eq!(new.limits.max_body_bytes, 77);
        assert_eq!(new.storage.request_log.max_rows, 3);
        // New certificate paths on a TLS listener are re-read, not a restart.
        let live = cfg("tls: {cert: a.pem, key: a.key}\n");
        let mut new = cfg("tls: {cert: b.pem, key: b.key}\n");
        assert!(restart_only(&live, &mut new).is_empty());
        assert_eq!(new.tls.unwrap().cert, std::path::PathBuf::from("b.pem"));
        // R17: the shared Redis and the replica count are read at start.
        let live = cfg("shared: {redis: \"redis://127.0.0.1:7000\", replicas: 2}\n");
        let mut new = cfg("shared: {redis: \"redis://127.0.0.1:7001\", replicas: 3}\n");
        assert_eq!(
            restart_only(&live, &mut new),
            ["shared.redis", "shared.replicas"]
        );
        assert_eq!(new.shared.redis.unwrap().expose(), "redis://127.0.0.1:7000");
        assert_eq!(new.shared.replicas, 2);
    }

    /// R17: the database and its lease period are read once; `shared.fail_open` applies live.
    #[test]
    fn the_database_is_restart_only_and_fail_open_is_not() {
        let live = cfg("storage: {url: \"postgres://u@h/a\"}\n");
        let mut new = cfg("storage: {url: \"postgres://u@h/b\", lease_ttl: 9s, queue_capacity: 5, pool_size: 3, pool_timeout: 1s, debit_batch: 1}\nshared: {fail_open: true}\n");
        let keys = restart_only(&live, &mut new);
        assert_eq!(
            keys,
            [
                "storage.url",
                "storage.lease_ttl",
                "storage.queue_capacity",
                "storage.pool_size",
                "storage.pool_timeout",
                "storage.debit_batch"
            ]
        );
        assert_eq!(new.storage.pool_size, live.storage.pool_size);
        assert_eq!(new.storage.pool_timeout, live.storage.pool_timeout);
        assert_eq!(new.storage.debit_batch, live.storage.debit_batch);
        assert_eq!(new.storage.url, live.storage.url);
        assert_eq!(new.storage.lease_ttl, live.storage.lease_ttl);
        assert_eq!(new.storage.queue_capacity, live.storage.queue_capacity);
        assert!(new.shared.fail_open);
    }
}
