//! What the operator can see of the configuration (R2.4, B-reload-visibility): the live
//! generation, when it was loaded, the last reload's outcome and error, and the settings
//! that changed in the file but wait for a restart. Shown at `GET /admin/config`, mirrored in
//! `switchyard_config_last_reload_successful` and
//! `switchyard_config_last_reload_success_timestamp_seconds`, and sent to systemd as `STATUS=`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::telemetry;

/// How one reload ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// A new table is live.
    Applied { generation: u64 },
    /// The file holds what is already live; nothing was swapped.
    Unchanged { generation: u64 },
    /// Rejected; the previous table stays.
    Failed { error: String },
}

impl ReloadOutcome {
    /// The `result` label of `switchyard_config_reload_total`.
    pub fn label(&self) -> &'static str {
        match self {
            ReloadOutcome::Applied { .. } => "ok",
            ReloadOutcome::Unchanged { .. } => "unchanged",
            ReloadOutcome::Failed { .. } => "error",
        }
    }
}

#[derive(Debug)]
struct Inner {
    file: PathBuf,
    generation: u64,
    loaded_at_ms: i64,
    last_attempt_ms: i64,
    last_result: &'static str,
    last_error: Option<String>,
    last_success_ms: i64,
    restart_required: Vec<String>,
    tls_reloaded_at_ms: Option<i64>,
    /// Reloads by outcome: applied, unchanged, failed.
    counts: [u64; 3],
}

/// Shared between the reloader, the admin API and systemd notification.
#[derive(Debug)]
pub struct ConfigStatus {
    inner: Mutex<Inner>,
}

fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

impl ConfigStatus {
    /// The first table, loaded at start-up: a successful load (Prometheus does the same).
    pub fn new(file: &Path, generation: u64) -> ConfigStatus {
        let now = crate::store::now_ms();
        let status = ConfigStatus {
            inner: Mutex::new(Inner {
                file: file.to_path_buf(),
                generation,
                loaded_at_ms: now,
                last_attempt_ms: now,
                last_result: "ok",
                last_error: None,
                last_success_ms: now,
                restart_required: Vec::new(),
                tls_reloaded_at_ms: None,
                counts: [0; 3],
            }),
        };
        telemetry::register_reload_results();
        telemetry::register_otlp();
        telemetry::config_reload_result(true, now);
        status
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::lock::lock(&self.inner)
    }

    /// Record one reload; `restart_required` is the full list of settings that differ from
    /// what is running (`None`: unchanged since the last reload).
    pub fn record(&self, outcome: &ReloadOutcome, restart_required: Option<Vec<String>>) {
        let now = crate::store::now_ms();
        let mut inner = self.lock();
        inner.last_attempt_ms = now;
        inner.last_result = outcome.label();
        inner.counts[match outcome {
            ReloadOutcome::Applied { .. } => 0,
            ReloadOutcome::Unchanged { .. } => 1,
            ReloadOutcome::Failed { .. } => 2,
        }] += 1;
        match outcome {
            ReloadOutcome::Applied { generation } => {
                inner.generation = *generation;
                inner.loaded_at_ms = now;
            }
            ReloadOutcome::Unchanged { generation } => inner.generation = *generation,
            ReloadOutcome::Failed { error } => {
                inner.last_error = Some(error.clone());
                drop(inner);
                telemetry::config_reload_result(false, now);
                return;
            }
        }
        inner.last_error = None;
        inner.last_success_ms = now;
        if let Some(keys) = restart_required {
            inner.restart_required = keys;
        }
        telemetry::config_reload_result(true, now);
    }

    /// A renewed certificate was swapped in.
    pub fn tls_reloaded(&self) {
        self.lock().tls_reloaded_at_ms = Some(crate::store::now_ms());
    }

    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// The JSON of `GET /admin/config`.
    pub fn view(&self) -> Value {
        let inner = self.lock();
        json!({
            "file": inner.file.display().to_string(),
            "generation": inner.generation,
            "loaded_at": rfc3339(inner.loaded_at_ms),
            "loaded_at_ms": inner.loaded_at_ms,
            "last_reload": {
                "at": rfc3339(inner.last_attempt_ms),
                "at_ms": inner.last_attempt_ms,
                "result": inner.last_result,
                "error": inner.last_error,
            },
            "last_reload_successful": inner.last_error.is_none(),
            "last_success_at": rfc3339(inner.last_success_ms),
            "restart_required": inner.restart_required,
            "reloads": {"ok": inner.counts[0], "unchanged": inner.counts[1], "error": inner.counts[2]},
            "tls_reloaded_at": inner.tls_reloaded_at_ms.map(rfc3339),
        })
    }
}
