//! Async task relay (R10.5): which calls are task calls, the task id of an
//! accepted submission, and the task → channel lock that follow-ups obey.
//!
//! Decisions:
//! - A task call is any request under a `tasks.paths` prefix: `POST <prefix>` submits,
//!   `<prefix>/{id}...` (any method) follows up on task `{id}`. Both are classified with
//!   the task rule (`Facts::is_task`), which replaces the R10.1 family matrix for them.
//! - A successful `POST` task call whose JSON answer carries a task id (`id`, `task_id`,
//!   `data.id` or `data.task_id`) binds (client, task id, channel): in a bounded in-memory
//!   cache at once and in SQLite (`task_binding`) through the writer, durably. With shared
//!   state the binding is also published to the other replicas' caches at once
//!   (B-shared-task-bindings), so a follow-up there does not wait for the store.
//! - Tenants stay apart (B-tenants): a binding belongs to the client that submitted the
//!   task. Another client — even one in the same group — gets `404 task_not_found` for it,
//!   and equal ids from two channels (providers number their tasks independently) are two
//!   bindings that never overwrite each other.
//! - A follow-up is routed to the client's bound channels only, newest binding first (one
//!   tier each), so every retry (next key, same-target retry) stays on them whatever the
//!   priorities or breakers say now. One binding is the common case; with the same id on
//!   two channels, a follow-up the newest one rejects (its 404 fails over under the task
//!   rule) reaches the older one.
//! - An unknown task id is answered `404 task_not_found`: sending it to an arbitrary
//!   upstream could only fail there and would hand the id to another provider. The same
//!   answer covers bound channels that are gone from the config or outside the client's
//!   groups.
//! - Bindings stored before schema v4 have no known owner (client `''`); they stay usable
//!   by any client whose groups hold the channel, as before, after the client's own.
//! - Reads go to the cache first; only a miss (or an entry created by a new binding, which
//!   may not hold older ones yet, or a negative answer older than [`NEGATIVE_TTL`]: another
//!   replica may have written the binding since) reads the store (the reader connection, never the writer
//!   queue). A bound channel that is disabled in the config still answers its
//!   follow-ups, so accepted tasks stay retrievable; a removed one gives 404.
//! - The lock is to the channel, not the key: a follow-up may use any key of it
//!   (`task_binding` stores the channel only).

use std::sync::Arc;

use http::{Method, StatusCode};

use crate::error::GatewayError;
use crate::relay::gateway::Gateway;
use crate::routing::table::{Route, Tier, TierTarget};
use crate::state::Snapshot;
use crate::store::{now_ms, TaskBinding};

pub use crate::relay::intake::task_cache::{Entry, TaskCache, NEGATIVE_TTL, TASK_CACHE_CAP};

/// Longest task id accepted from an upstream answer or a path.
const MAX_TASK_ID: usize = 256;

/// What kind of task call a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskCall<'a> {
    Submit,
    FollowUp { id: &'a str },
}

/// The task facts of one request, computed by the handler.
#[derive(Debug, Clone, Default)]
pub struct TaskFacts {
    /// Classify with the task rule (R10.5).
    pub is_task: bool,
    /// A follow-up's only route: (group, route holding the locked channel).
    pub locked: Option<(usize, Arc<Route>)>,
}

/// Is `path` a task call under one of `prefixes` (`tasks.paths`, no trailing `/`)?
pub fn task_call<'a>(prefixes: &[String], method: &Method, path: &'a str) -> Option<TaskCall<'a>> {
    for p in prefixes {
        let Some(rest) = path.strip_prefix(p.as_str()) else {
            continue;
        };
        if rest.is_empty() || rest == "/" {
            if method == Method::POST {
                return Some(TaskCall::Submit);
            }
            continue;
        }
        if let Some(tail) = rest.strip_prefix('/') {
            let id = tail.split('/').next().unwrap_or("");
            if valid_id(id) {
                return Some(TaskCall::FollowUp { id });
            }
        }
    }
    None
}

fn valid_id(id: &str) -> bool {
    (1..=MAX_TASK_ID).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// The task id in an accepted submission's JSON answer.
pub fn task_id(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let pick = |v: &serde_json::Value| -> Option<String> {
        match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let data = v.get("data");
    let id = [
        v.get("id"),
        v.get("task_id"),
        data.and_then(|d| d.get("id")),
        data.and_then(|d| d.get("task_id")),
    ]
    .into_iter()
    .flatten()
    .find_map(pick);
    id.filter(|s| valid_id(s))
}

/// The channels `client`'s task `id` is bound to, newest first: cache first, then SQLite
/// (which completes the cache entry).
pub async fn bound_channels(gw: &Gateway, client: &str, id: &str) -> Vec<String> {
    let cached = gw.tasks.get(client, id);
    if let Some(e) = &cached {
        if e.complete {
            return e.channels.clone();
        }
    }
    match gw.store.task_channels(client, id).await {
        Ok(stored) => gw.tasks.fill(client, id, stored),
        Err(e) => {
            tracing::warn!(error = %e, "task binding lookup failed");
            cached.map(|e| e.channels).unwrap_or_default()
        }
    }
}

/// Record that `channel` accepted `client`'s task in `body` (a successful POST task call).
pub fn bind_from_body(gw: &Gateway, client: &str, channel: &str, body: &[u8]) {
    let Some(id) = task_id(body) else {
        tracing::debug!(channel, "task call answered without a task id");
        return;
    };
    gw.tasks.bind(client, &id, channel);
    let op = TaskBinding {
        client: client.to_string(),
        task_id: id,
        channel: channel.to_string(),
        ts_ms: now_ms(),
    };
    // A binding must not be lost: queue it durably, off the request path (this waits
    // only when the writer queue is full).
    let store = gw.store.clone();
    tokio::spawn(async move {
        if let Err(e) = store.send_durable_async(op).await {
            tracing::error!(error = %e, "task binding not stored");
        }
    });
}

impl crate::shared::TaskBindings for Gateway {
    fn apply(&self, client: &str, id: &str, channel: &str) {
        self.tasks.apply(client, id, channel);
    }
}

/// Share task bindings with the other replicas (R17.1): this gateway's new bindings are
/// published, and theirs land in its cache (B-shared-task-bindings).
pub fn share(gw: &Arc<Gateway>, shared: &crate::shared::Shared) {
    gw.tasks.share(shared.sink());
    shared.attach_tasks(gw.clone());
}

/// The task facts of a request (the handler's only task hook). `client` is the caller's
/// name: a follow-up reaches only that client's bindings.
pub async fn facts(
    gw: &Gateway,
    snap: &Snapshot,
    method: &Method,
    path: &str,
    client: &str,
    groups: &[std::sync::Arc<str>],
) -> Result<TaskFacts, GatewayError> {
    match task_call(&snap.table.config.tasks.paths, method, path) {
        None => Ok(TaskFacts::default()),
        Some(TaskCall::Submit) => Ok(TaskFacts {
            is_task: true,
            locked: None,
        }),
        Some(TaskCall::FollowUp { id }) => {
            let bound = bound_channels(gw, client, id).await;
            match locked_route(snap, &bound, groups) {
                Some(l) => Ok(TaskFacts {
                    is_task: true,
                    locked: Some(l),
                }),
                None => Err(task_not_found(id)),
            }
        }
    }
}

/// The route of a follow-up: one tier per bound channel (newest first) that is still
/// configured and in one of the client's groups, under the group of the first of them.
pub fn locked_route(
    snap: &Snapshot,
    channels: &[String],
    groups: &[Arc<str>],
) -> Option<(usize, Arc<Route>)> {
    let chans = &snap.table.channels;
    let usable: Vec<(usize, usize)> = channels
        .iter()
        .filter_map(|name| {
            let id = chans.iter().position(|c| &c.name == name)?;
            let group = groups
                .iter()
                .position(|g| chans[id].groups.iter().any(|c| **c == **g))?;
            Some((id, group))
        })
        .collect();
    let group = usable.first()?.1;
    let n = usable.len() as i64;
    let tiers = usable
        .iter()
        .enumerate()
        .map(|(i, (id, _))| Tier {
            priority: n - i as i64,
            candidates: vec![TierTarget {
                channel: *id,
                upstream_model: Arc::from(""),
                weight: 1,
            }],
        })
        .collect();
    Some((group, Arc::new(Route::of(tiers))))
}

fn task_not_found(id: &str) -> GatewayError {
    GatewayError::new(
        StatusCode::NOT_FOUND,
        "task_not_found",
        "not_found_error",
        format!("unknown task `{id}`"),
    )
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
