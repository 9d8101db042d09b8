//! switchyard: a single-binary LLM API gateway (see ARCHITECTURE.md for the code map).
//!
//! - `config`: YAML/env loading, validation with key paths, resilience merge, explain text.
//! - `routing`: the compiled `RouteTable`, weighted draw, attempt plans, the outcome classifier.
//! - `affinity`: sticky keys and channel bindings that keep prompt caches warm (R8).
//! - `state`: runtime state outside the table, keyed by channel name (survives reload).
//! - `http`: the client listener, connection limits, framing guard, path hygiene, header tables.
//! - `relay`: one request — entry, attempt loop, exchange, stream pump, response, request log.
//! - `upstream`: the pooled upstream clients, upstream bodies, provider kinds.
//! - `limits`: rate limits per client and per upstream key, upstream reset learning (R15).
//! - `billing`: per-client balances, per-request billing sessions, ledger recovery (R11).
//! - `store`: SQLite writer thread (request log, ledger, disabled state, bindings).
//! - `admin`, `admin_views`: the admin listener and its JSON views.
//! - `app`: start-up, reload, signals, systemd notification.
//! - `telemetry`: every metric name; `error`: errors in the caller's wire format.
//! - `lock`, `clock`: the poison-tolerant lock helper and the wall clock, each in one place.
//! - `wire`: pure wire-format code (request peek, SSE, dialects, usage, stream policies);
//!   `wire::translate` converts between provider formats (R16).
pub mod admin;
pub mod admin_views;
pub mod affinity;
pub mod app;
pub mod billing;
pub mod boxed;
pub mod clock;
pub mod config;
pub mod error;
pub mod fastmap;
pub mod http;
pub mod limits;
pub mod lock;
pub mod relay;
pub mod routing;
pub mod secret;
pub mod shared;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod upstream;
pub mod wire;

use std::path::Path;

/// `switchyard explain`: the admin explain view computed from a config file, without live
/// state. A model (or path) that no group of the client serves is an error naming the
/// groups searched.
pub fn explain_cmd(
    config: &Path,
    client: &str,
    model: Option<&str>,
    path: Option<&str>,
) -> Result<String, String> {
    let cfg = config::load(config).map_err(|e| e.to_string())?;
    let table = routing::compile::compile(std::sync::Arc::new(cfg), 1);
    let snap = state::Snapshot::new(table, &state::Registry::default());
    let explained = admin_views::explain_value(&snap, Some(client), model, path, false)?;
    if explained["served"] == false {
        let what = match (model, path) {
            (Some(m), _) => format!("model {m:?}"),
            (None, Some(p)) => format!("path {p:?}"),
            (None, None) => "nothing".into(),
        };
        let groups: Vec<String> = explained["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(|g| format!("{g:?}")))
            .collect();
        return Err(format!(
            "{}: no channel serves {what} for client {client:?}; groups searched: {}",
            config.display(),
            if groups.is_empty() {
                "none (auto_groups is empty)".to_string()
            } else {
                groups.join(", ")
            }
        ));
    }
    serde_json::to_string_pretty(&explained).map_err(|e| e.to_string())
}
