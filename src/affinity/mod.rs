//! Affinity and sticky routing that keeps upstream prompt caches warm (R8).
//!
//! # Keys
//! A request gets at most one sticky key. The first `affinity.rules` entry whose `model`
//! regex matches the public model and whose `path` equals the request path gives it,
//! from `body.<json path>` or `header.<name>` (R8.1; without `affinity.rules` the two
//! defaults apply: `^gpt-.*$` on `/v1/responses` by `prompt_cache_key`, `^claude-.*$` on
//! `/v1/messages` by `metadata.user_id`). A matching rule whose field is absent falls
//! through to the sticky levels. When no rule gives a key, the first of these that is
//! present wins (R8.2), on every surface:
//!
//! | level | fields (first present) | TTL |
//! |---|---|---|
//! | conversation | headers `x-conversation-id`, `thread-id` (Codex); body `metadata.conversation_id`, `conversation_id`, `conversation` (a string or an object's `id`; the Responses API) | `conversation_ttl` (2h) |
//! | session | headers `x-session-id`, `session_id`, `session-id` (Codex), `x-claude-code-session-id`; body `metadata.session_id`, the session of a Claude Code `metadata.user_id`, `session_id`, `prompt_cache_key` (chat and responses) | `session_ttl` (2h) |
//! | user | body `metadata.user_id` (the Messages API; a Claude Code one gives its `device_id`), `user` (chat and responses) | `user_model_ttl` (30m) |
//! | client_model | the client + public model — only for a follow-up turn (`messages` or `input` with ≥ 2 items) | `user_model_ttl` (30m) |
//! | bucket | one of [`key::BUCKETS`] (64) buckets of hash(client, path) — follow-up turns on pass-through paths without a model | `bucket_ttl` (10m) |
//!
//! A first turn without any id is not pinned: it is balanced by weight as usual, so one
//! client's traffic is not glued to one channel. `previous_response_id` is not a key (it
//! changes every turn). Values are hashed at once with the client, its group, the public
//! model and the level (SHA-256, 128 bits); raw ids never reach memory maps, SQLite or
//! metrics, and two tenants' equal ids are two keys (B-tenants). Claude Code's
//! `metadata.user_id` (a JSON string `{"device_id", "account_uuid", "session_id"}` today,
//! `user_<hash>_account_<uuid>_session_<uuid>` before) keys on its session, else its
//! device — for a rule on that field too ([`key::claude_identity`]).
//!
//! # Bindings
//! The binding records the channel (by name) that last succeeded for the key (R8.3). The
//! bound channel is tried first when [`bound_channel_usable`] says so and it is a
//! candidate of this request: the plan (fixed at request start, R4.8) starts with it.
//! Otherwise normal selection runs and the binding moves after the success elsewhere. A
//! binding is written or refreshed only after a success (a full answer, or a stream at
//! its commit point), never after a failure. A binding to a channel no longer configured
//! is dropped when met. `skip_retry_on_failure` (R8.4) returns a failed bound attempt.
//!
//! # Observability (R8.5, R8.6)
//! `switchyard_sticky_total{kind, result}` with result `hit` (bound channel planned
//! first), `miss` (no binding), `stale` (bound channel unusable or not a candidate),
//! `fallback` (a binding existed but another channel answered). The request log has
//! `sticky_kind`, `sticky_hit`, `fallback`. The prompt-cache hit ratio per channel is
//! `rate(switchyard_cached_prompt_tokens_total[5m]) / rate(switchyard_prompt_tokens_total[5m])`
//! (both labelled by `channel`). `/admin/explain?...&key=<value>` shows the bindings of a key.
pub mod key;
pub mod persist;
pub mod store;

use std::sync::Arc;

use serde_json::{json, Value};

pub use key::{sticky_key, KeyInput, StickyKey, StickyKind, TopFields};
pub use store::{Binding, Bindings};

use crate::routing::table::{ChannelId, Route};
use crate::state::Snapshot;

/// May the bound channel be tried first? Only when it is a candidate of this request with
/// a target — (channel, upstream model) — that is available: not disabled (operator or
/// auto), admitted by its breaker, not cooling down (R6.4, R8.3), not "model not found".
pub fn bound_channel_usable(snap: &Snapshot, routes: &[(&str, &Route)], id: ChannelId) -> bool {
    let (Some(c), Some(s)) = (snap.table.channels.get(id), snap.states.get(id)) else {
        return false;
    };
    let now = crate::clock::instant();
    c.enabled
        && routes
            .iter()
            .flat_map(|(_, r)| r.tiers.iter())
            .flat_map(|t| t.candidates.iter())
            .filter(|cd| cd.channel == id)
            .any(|cd| crate::state::outcome::available(c, s, &cd.upstream_model, now))
}

/// The affinity state of one request.
#[derive(Debug, Clone)]
pub struct Sticky {
    pub key: StickyKey,
    /// Channel name of the live binding, if any.
    pub bound: Option<Arc<str>>,
    /// The bound channel, when usable and a candidate of this request.
    pub preferred: Option<ChannelId>,
    /// Set by [`Sticky::planned`]: the plan starts with the bound channel.
    pub hit: bool,
}

impl Sticky {
    /// Look up the binding of `key` in the request's snapshot.
    pub fn lookup(
        bindings: &Bindings,
        snap: &Snapshot,
        routes: &[(&str, &Route)],
        key: StickyKey,
    ) -> Sticky {
        let mut bound = bindings.get(key.hash).map(|b| b.channel);
        let mut preferred = None;
        if let Some(name) = &bound {
            match snap
                .table
                .channels
                .iter()
                .position(|channel| channel.name == **name)
            {
                Some(id) => {
                    if bound_channel_usable(snap, routes, id) {
                        preferred = Some(id);
                    }
                }
                None => {
                    bindings.forget(key.hash, name);
                    bound = None;
                }
            }
        }
        Sticky {
            key,
            bound,
            preferred,
            hit: false,
        }
    }

    /// Record whether the plan starts with the bound channel; counts hit/miss/stale.
    pub fn planned(&mut self, first: Option<ChannelId>) {
        self.hit = self.preferred.is_some() && first == self.preferred;
        let result = match (&self.bound, self.hit) {
            (_, true) => "hit",
            (None, false) => "miss",
            (Some(_), false) => "stale",
        };
        count(self.key.kind, result);
    }

    /// Is this attempt the bound one whose failure must be returned (R8.4)?
    pub fn skip_retry(&self, channel: ChannelId, first_attempt: bool) -> bool {
        self.key.skip_retry && self.hit && first_attempt && self.preferred == Some(channel)
    }

    /// After a success on `channel`: write or refresh the binding. Returns `fallback`
    /// (a binding existed and another channel answered).
    pub fn succeeded(&self, bindings: &Bindings, channel: &str) -> bool {
        bindings.bind(&self.key, channel);
        let fallback = self.bound.as_deref().is_some_and(|b| b != channel);
        if fallback {
            count(self.key.kind, "fallback");
        }
        fallback
    }
}

fn count(kind: StickyKind, result: &'static str) {
    metrics::counter!(crate::telemetry::STICKY, "kind" => kind.as_str(), "result" => result)
        .increment(1);
}

/// `/admin/explain` detail: the live bindings of `value` for (client, group, model) at
/// every level.
pub fn explain(bindings: &Bindings, client: &str, group: &str, model: &str, value: &str) -> Value {
    let now = tokio::time::Instant::now();
    let found: Vec<Value> = StickyKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let hash = key::key_hash(client, group, model, kind, value);
            bindings.get(hash).map(|b| {
                json!({
                    "kind": kind.as_str(),
                    "key_hash": format!("{hash:032x}"),
                    "channel": &*b.channel,
                    "expires_in_secs": b.expires.saturating_duration_since(now).as_secs(),
                })
            })
        })
        .collect();
    json!({ "group": group, "model": model, "bindings": found })
}
