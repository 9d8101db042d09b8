//! Async task relay (R10.5; seed 000 §11): which calls are task calls, the task id of an
//! accepted submission, and the task → channel lock that follow-ups obey.
//!
//! Decisions:
//! - A task call is any request under a `tasks.paths` prefix: `POST <prefix>` submits,
//!   `<prefix>/{id}...` (any method) follows up on task `{id}`. Both are classified with
//!   the task rule (`Facts::is_task`), which replaces the R10.1 family matrix for them.
//! - A successful `POST` task call whose JSON answer carries a task id (`id`, `task_id`,
//!   `data.id` or `data.task_id`) binds that id to the answering channel: in a bounded
//!   in-memory cache at once and in SQLite (`task_binding`) through the writer.
//! - A follow-up is routed to the bound channel only — one candidate, so every retry
//!   (next key, same-target retry) stays on it, whatever the priorities or breakers say now.
//! - An unknown task id is answered `404 task_not_found`: sending it to an arbitrary
//!   upstream could only fail there and would hand the id to another provider. The same
//!   answer covers a bound channel that is gone from the config or outside the client's
//!   groups.
//! - Reads go to the cache first; only a miss reads SQLite (the reader connection, never
//!   the writer queue). A bound channel that is disabled in the config still answers its
//!   follow-ups, so accepted tasks stay retrievable; a removed one gives 404.
//! - The lock is to the channel, not the key: a follow-up may use any key of it
//!   (`task_binding` stores the channel only).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use http::{Method, StatusCode};

use super::gateway::Gateway;
use crate::error::GatewayError;
use crate::routing::table::{Candidate, Route, Tier};
use crate::state::Snapshot;
use crate::store::{now_ms, TaskBinding};

/// Entries kept in memory; older bindings are read back from SQLite on demand.
pub const TASK_CACHE_CAP: usize = 10_000;

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
    pub locked: Option<(String, Arc<Route>)>,
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

/// Bounded task id → channel name cache (oldest insert evicted first). It also remembers
/// ids SQLite does not know (`None`), so repeated polls of a bogus id cost one read; a
/// later binding overwrites such an entry.
#[derive(Debug)]
pub struct TaskCache {
    inner: Mutex<Inner>,
    cap: usize,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<String, Option<String>>,
    order: VecDeque<String>,
}

impl Default for TaskCache {
    fn default() -> Self {
        TaskCache::new(TASK_CACHE_CAP)
    }
}

impl TaskCache {
    pub fn new(cap: usize) -> Self {
        TaskCache {
            inner: Mutex::new(Inner::default()),
            cap: cap.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Some(Some(ch))`: bound; `Some(None)`: known to be unbound; `None`: not cached.
    pub fn get(&self, id: &str) -> Option<Option<String>> {
        self.lock().map.get(id).cloned()
    }

    pub fn insert(&self, id: &str, channel: &str) {
        self.put(id, Some(channel.to_string()));
    }

    /// Remember that `id` has no binding.
    pub fn insert_unknown(&self, id: &str) {
        self.put(id, None);
    }

    fn put(&self, id: &str, channel: Option<String>) {
        let mut g = self.lock();
        if g.map.insert(id.to_string(), channel).is_none() {
            g.order.push_back(id.to_string());
        }
        while g.order.len() > self.cap {
            if let Some(old) = g.order.pop_front() {
                g.map.remove(&old);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The channel a task is bound to: cache first, then SQLite (which refills the cache).
pub async fn bound_channel(gw: &Gateway, id: &str) -> Option<String> {
    if let Some(hit) = gw.tasks.get(id) {
        return hit;
    }
    match gw.store.task_channel(id).await {
        Ok(Some(ch)) => {
            gw.tasks.insert(id, &ch);
            Some(ch)
        }
        Ok(None) => {
            gw.tasks.insert_unknown(id);
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "task binding lookup failed");
            None
        }
    }
}

/// Record that `channel` accepted the task in `body` (a successful POST task call).
pub fn bind_from_body(gw: &Gateway, channel: &str, body: &[u8]) {
    let Some(id) = task_id(body) else {
        tracing::debug!(channel, "task call answered without a task id");
        return;
    };
    gw.tasks.insert(&id, channel);
    let op = TaskBinding {
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

/// The task facts of a request (the handler's only task hook).
pub async fn facts(
    gw: &Gateway,
    snap: &Snapshot,
    method: &Method,
    path: &str,
    groups: &[String],
) -> Result<TaskFacts, GatewayError> {
    match task_call(&snap.table.config.tasks.paths, method, path) {
        None => Ok(TaskFacts::default()),
        Some(TaskCall::Submit) => Ok(TaskFacts {
            is_task: true,
            locked: None,
        }),
        Some(TaskCall::FollowUp { id }) => {
            let locked = match bound_channel(gw, id).await {
                Some(ch) => locked_route(snap, &ch, groups),
                None => None,
            };
            match locked {
                Some(l) => Ok(TaskFacts {
                    is_task: true,
                    locked: Some(l),
                }),
                None => Err(task_not_found(id)),
            }
        }
    }
}

/// A one-candidate route for the channel a task is locked to, in the first of the
/// client's groups that channel serves.
pub fn locked_route(
    snap: &Snapshot,
    channel: &str,
    groups: &[String],
) -> Option<(String, Arc<Route>)> {
    let chans = &snap.table.channels;
    let id = chans.iter().position(|c| c.name == channel)?;
    let ch = &chans[id];
    let group = groups.iter().find(|g| ch.groups.contains(g))?;
    let route = Route {
        tiers: vec![Tier {
            priority: ch.priority,
            candidates: vec![Candidate {
                channel: id,
                upstream_model: Arc::from(""),
                weight: 1,
            }],
        }],
    };
    Some((group.clone(), Arc::new(route)))
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
mod tests {
    use super::*;

    #[test]
    fn task_calls() {
        let p = vec!["/v1/videos".to_string(), "/v1/mj/submit".to_string()];
        let post = Method::POST;
        let get = Method::GET;
        let rows: &[(&Method, &str, Option<TaskCall>)] = &[
            (&post, "/v1/videos", Some(TaskCall::Submit)),
            (&post, "/v1/videos/", Some(TaskCall::Submit)),
            (&get, "/v1/videos", None),
            (
                &get,
                "/v1/videos/task_1",
                Some(TaskCall::FollowUp { id: "task_1" }),
            ),
            (
                &get,
                "/v1/videos/task_1/content",
                Some(TaskCall::FollowUp { id: "task_1" }),
            ),
            (
                &post,
                "/v1/videos/task_1/remix",
                Some(TaskCall::FollowUp { id: "task_1" }),
            ),
            (&post, "/v1/videosx", None),
            (&post, "/v1/chat/completions", None),
            (&post, "/v1/mj/submit", Some(TaskCall::Submit)),
            (&get, "/v1/videos//x", None),
        ];
        for (m, path, want) in rows {
            assert_eq!(task_call(&p, m, path), *want, "{m} {path}");
        }
        assert_eq!(task_call(&[], &post, "/v1/videos"), None);
    }

    #[test]
    fn task_ids() {
        let rows: &[(&str, Option<&str>)] = &[
            (r#"{"id":"task_1","status":"queued"}"#, Some("task_1")),
            (r#"{"task_id":"t2"}"#, Some("t2")),
            (r#"{"code":0,"data":{"id":"d3"}}"#, Some("d3")),
            (r#"{"data":{"task_id":"d4"}}"#, Some("d4")),
            (r#"{"data":"d5"}"#, None),
            (r#"{"id":12345}"#, Some("12345")),
            (r#"{"id":"has space"}"#, None),
            (r#"{"id":""}"#, None),
            (r#"{"id":null,"task_id":"t6"}"#, Some("t6")),
            ("not json", None),
            ("", None),
        ];
        for (body, want) in rows {
            assert_eq!(task_id(body.as_bytes()).as_deref(), *want, "{body}");
        }
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_TASK_ID + 1));
        assert_eq!(task_id(long.as_bytes()), None);
    }

    #[test]
    fn cache_is_bounded_and_evicts_oldest() {
        let c = TaskCache::new(3);
        for i in 0..5 {
            c.insert(&format!("t{i}"), &format!("ch{i}"));
        }
        assert_eq!(c.len(), 3);
        assert_eq!(c.get("t0"), None);
        assert_eq!(c.get("t1"), None);
        assert_eq!(c.get("t4"), Some(Some("ch4".into())));
        // Re-binding updates in place without growing.
        c.insert("t4", "other");
        assert_eq!(c.len(), 3);
        assert_eq!(c.get("t4"), Some(Some("other".into())));
        assert_eq!(c.get("t2"), Some(Some("ch2".into())));
        // A known-unknown id is cached, and a later binding replaces it.
        c.insert_unknown("t2");
        assert_eq!(c.get("t2"), Some(None));
        c.insert("t2", "late");
        assert_eq!(c.get("t2"), Some(Some("late".into())));
        assert_eq!(c.len(), 3);
    }
}
