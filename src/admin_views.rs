//! JSON views of live state for the admin API and the `explain` command (R7.2, R12.3).

use std::collections::HashMap;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use crate::config::model::Balance;
use crate::error::{ClientFormat, GatewayError};
use crate::http::body::{error_response, json_response, Resp};
use crate::relay::gateway::Gateway;
use crate::routing::latency::Score;
use crate::routing::plan::{AttemptPlan, PlanInput};
use crate::routing::policy::Decision;
use crate::routing::table::{ModelMatch, Route};
use crate::state::Snapshot;

/// `GET /admin/channels`.
pub fn channels(gw: &Gateway) -> Resp {
    let snap = gw.snapshot();
    let list: Vec<Value> = snap
        .table
        .channels
        .iter()
        .enumerate()
        .map(|(id, c)| channel_view(&snap, id, c))
        .collect();
    json_response(
        StatusCode::OK,
        json!({ "generation": snap.table.generation, "channels": list }).to_string(),
    )
}

/// A channel as configured (no runtime state): what offline `explain` can tell.
fn config_view(c: &crate::config::model::Channel) -> Value {
    json!({
        "name": c.name,
        "kind": c.kind.as_str(),
        "translate": c.translate,
        "configured_enabled": c.enabled,
        "keys": c.keys.len(),
        "priority": c.priority,
        "weight": c.weight,
        "groups": c.groups,
        "models": c.models,
        "key_limits": {"rpm": c.limits.rpm, "tpm": c.limits.tpm, "concurrency": c.limits.concurrency},
    })
}

/// A channel's disabled keys: the positions of configured ones (in this table's key list),
/// and for every disabled key its fingerprint (first 12 hex digits; never the key), its
/// position (`null` once it is no longer configured) and why.
fn disabled_keys(snap: &Snapshot, id: usize) -> (Vec<usize>, Vec<Value>) {
    let fps = snap.key_fps.get(id).map(|f| &f[..]).unwrap_or_default();
    let mut positions = Vec::new();
    let details = snap
        .state(id)
        .disabled_keys()
        .into_iter()
        .map(|(fp, d)| {
            let index = fps.iter().position(|f| *f == fp);
            positions.extend(index);
            json!({"index": index, "fingerprint": fp.short(), "reason": d.reason, "at_ms": d.at_ms, "auto": d.auto})
        })
        .collect();
    positions.sort_unstable();
    (positions, details)
}

pub(crate) fn channel_view(
    snap: &Snapshot,
    id: usize,
    channel: &crate::config::model::Channel,
) -> Value {
    let st = snap.state(id);
    let disabled = st.disabled();
    let mut view = config_view(channel);
    view["enabled"] = json!(channel.enabled && disabled.is_none());
    view["disabled"] = json!(disabled);
    let (disabled_keys, key_details) = disabled_keys(snap, id);
    view["disabled_keys"] = json!(disabled_keys);
    view["disabled_key_details"] = json!(key_details);
    view["health"] = crate::state::outcome::view(channel, st);
    view
}

/// `GET /admin/clients/{name}`.
pub fn client(gw: &Gateway, name: &str) -> Resp {
    let snap = gw.snapshot();
    let Some(c) = snap.table.clients.iter().find(|c| &*c.name == name) else {
        return error_response(
            &GatewayError::new(
                StatusCode::NOT_FOUND,
                "client_not_found",
                "not_found_error",
                format!("no client named `{name}`"),
            ),
            ClientFormat::OpenAi,
        );
    };
    json_response(StatusCode::OK, client_value(gw, c).to_string())
}

/// A client's quota, what it was charged and refunded, and its limits now.
pub(crate) fn client_value(gw: &Gateway, client: &crate::config::model::Client) -> Value {
    let account = gw.billing.view(client);
    let credits = crate::billing::price::credits;
    json!({"name": client.name, "group": client.group, "quota": client.quota, "trusted": client.trusted, "cross_group_retry": client.cross_group_retry,
        "charged": credits(account.charged), "refunded": credits(account.refunded), "remaining": account.remaining.map(credits),
        "charged_micro": account.charged, "refunded_micro": account.refunded, "remaining_micro": account.remaining,
        "limits": limits_view(gw, client)})
}

/// R15.1: each configured limit of a client with what is used and what remains now
/// (`concurrency`: requests in flight); `{}` for an unlimited client.
fn limits_view(gw: &Gateway, client: &crate::config::model::Client) -> Value {
    use crate::limits::Kind;
    let report =
        gw.limiter()
            .client_report(&client.name, &client.limits, tokio::time::Instant::now());
    let mut out = serde_json::Map::new();
    for kind in Kind::ALL {
        if let Some(n) = report.get(kind) {
            out.insert(
                kind.as_str().into(),
                json!({"limit": n.limit, "used": n.limit.saturating_sub(n.remaining),
                    "remaining": n.remaining, "reset_ms": n.reset.as_millis() as u64}),
            );
        }
    }
    Value::Object(out)
}

/// R15.3: the keys of `channels` held back now — cooling after an upstream's rate-limit
/// answer (until when) or out of their `channels.*.limits` budget (with the numbers).
pub(crate) fn held_back_view(gw: &Gateway, snap: &Snapshot, channels: &[usize]) -> Vec<Value> {
    use crate::limits::Room;
    let now = tokio::time::Instant::now();
    let mut out = Vec::new();
    for &id in channels {
        let ch = &snap.table.channels[id];
        for k in 0..ch.keys.len() {
            let Some(fp) = crate::relay::attempt::keys::key_fp(snap, id, k) else {
                continue;
            };
            if let Some(until) = gw.key_cooldowns.cooling_until(&ch.name, &fp, now) {
                let ms = until.saturating_duration_since(now).as_millis() as u64;
                out.push(json!({"channel": ch.name, "key_index": k, "reason": "upstream_reset", "for_ms": ms}));
            } else if !ch.limits.is_unlimited() {
                let room = gw.limiter().key_room(&ch.name, &fp, &ch.limits, 0, now);
                if let Room::After(d) = room {
                    let ms = d.as_millis() as u64;
                    out.push(json!({"channel": ch.name, "key_index": k, "reason": "limit", "for_ms": ms}));
                }
            }
        }
    }
    out
}

/// `GET /admin/explain?client=&model=[&path=][&key=]` (`key`: a sticky key value, R8.6).
pub fn explain(gw: &Gateway, q: &HashMap<String, String>) -> Resp {
    let snap = gw.snapshot();
    match explain_value(
        &snap,
        q.get("client").map(String::as_str),
        q.get("model").map(String::as_str),
        q.get("path").map(String::as_str),
        true,
    ) {
        Ok(mut v) => {
            let mut ids: Vec<usize> = v["routes"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|g| g["tiers"].as_array().into_iter().flatten())
                .flat_map(|t| t["candidates"].as_array().into_iter().flatten())
                .filter_map(|c| c["name"].as_str())
                .filter_map(|n| snap.table.channels.iter().position(|ch| ch.name == n))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            v["keys_held_back"] = json!(held_back_view(gw, &snap, &ids));
            if let (Some(key), Some(c)) = (q.get("key"), q.get("client")) {
                let group = snap.table.clients.iter().find(|x| *x.name == **c);
                let model = q.get("model").map_or("", String::as_str);
                if let Some(cl) = group {
                    v["affinity"] =
                        crate::affinity::explain(&gw.bindings, &cl.name, &cl.group, model, key);
                }
            }
            json_response(StatusCode::OK, v.to_string())
        }
        Err(e) => error_response(
            &GatewayError::bad_request("bad_explain_query", e),
            ClientFormat::OpenAi,
        ),
    }
}

/// TierTarget tiers, channel state and one sample attempt order (R12.3). With `live: false`
/// (the `explain` command, from a file) no runtime state is shown: there is none to show.
/// `served` is false when no group of the client has a route for the model or path.
pub fn explain_value(
    snap: &Snapshot,
    client: Option<&str>,
    model: Option<&str>,
    path: Option<&str>,
    live: bool,
) -> Result<Value, String> {
    let client = client.ok_or("`client` is required")?;
    let c = snap
        .table
        .clients
        .iter()
        .find(|c| &*c.name == client)
        .ok_or_else(|| format!("no client named `{client}`"))?;
    let groups = if &*c.group == "auto" {
        snap.table.config.auto_groups.clone()
    } else {
        vec![c.group.clone()]
    };
    let (routes, patterns) = explain_routes(snap, &groups, model, path)?;
    let tiers: Vec<Value> = routes
        .iter()
        .map(|(g, r)| json!({"group": g, "tiers": tiers_view(snap, r, &patterns, live)}))
        .collect();
    let order = sample_order(snap, &routes, c.cross_group_retry);
    let mut view = json!({
        "client": client,
        "client_limits": {"rpm": c.limits.rpm, "rpd": c.limits.rpd, "tpm": c.limits.tpm, "concurrency": c.limits.concurrency},
        "groups": groups,
        "model": model,
        "path": path,
        "served": !routes.is_empty(),
        "tier_walk": snap.table.config.routing.tier_walk.as_str(),
        "balance": snap.table.config.routing.balance.as_str(),
        "retry_times": snap.table.config.routing.retry_times,
        "routes": tiers,
        "sample_attempt_order_if_every_attempt_fails": order,
    });
    if !live {
        view["live_state"] = json!("not shown: read from the file, not a running gateway; GET /admin/explain on the admin listener shows health, breakers and disabled state");
    }
    Ok(view)
}

/// (channel, pattern) of the candidates found through a model pattern (`claude-*`).
type Patterns = Vec<(usize, Arc<str>)>;

/// (group, route) of each group that serves the request.
type Routes = Vec<(Arc<str>, Arc<Route>)>;

/// The route of each group for `model` (or `path`), and the candidates matched by pattern.
fn explain_routes(
    snap: &Snapshot,
    groups: &[Arc<str>],
    model: Option<&str>,
    path: Option<&str>,
) -> Result<(Routes, Patterns), String> {
    let mut routes = Vec::new();
    let mut patterns = Vec::new();
    for g in groups {
        let r = match (model, path) {
            (Some(m), _) => snap.table.model_route(g, m).map(|(r, how)| {
                if let ModelMatch::Pattern(p) = how {
                    patterns.extend(p);
                }
                r
            }),
            (None, Some(p)) => snap
                .table
                .paths
                .get(crate::routing::pair::key(&(&**g, p)))
                .cloned(),
            (None, None) => return Err("`model` or `path` is required".into()),
        };
        if let Some(r) = r {
            routes.push((g.clone(), r));
        }
    }
    Ok((routes, patterns))
}

/// How a channel serves each client wire format (R16.1): `"as-is"`, translated
/// (`"openai->anthropic"`: client format -> the channel's), or `"no"` (`translate: false`).
fn client_formats(ch: &crate::config::model::Channel) -> Value {
    use crate::config::model::ChannelKind as K;
    use crate::routing::family::{channel_serves, PathFamily};
    let own = match ch.kind {
        K::OpenAi | K::Azure => "openai",
        K::Anthropic => "anthropic",
        K::Gemini => "gemini",
    };
    let how = |family, path, client: &str| {
        if !channel_serves(family, path, ch.kind, ch.translate) {
            "no".to_string()
        } else if client == own {
            "as-is".to_string()
        } else {
            format!("{client}->{own}")
        }
    };
    let count = "/v1/messages/count_tokens";
    let count_tokens = if channel_serves(PathFamily::TokenCount, count, ch.kind, ch.translate) {
        "as-is"
    } else if channel_serves(PathFamily::Messages, "/v1/messages", ch.kind, ch.translate) {
        // No upstream call: the gateway's own estimate (relay::local::count_tokens).
        "local_estimate"
    } else {
        "no"
    };
    let responses = if !crate::routing::family::serves(PathFamily::Responses, "/v1/responses", ch) {
        "no".to_string()
    } else {
        crate::relay::attempt::translated::of_channel(PathFamily::Responses, ch)
            .map_or_else(|| "as-is".to_string(), |x| x.label())
    };
    json!({
        "chat_completions": how(PathFamily::Chat, "/v1/chat/completions", "openai"),
        "messages": how(PathFamily::Messages, "/v1/messages", "anthropic"),
        "count_tokens": count_tokens,
        "responses": responses,
    })
}

/// One route's tiers, each candidate with its channel view (live state or config only).
fn tiers_view(snap: &Snapshot, r: &Route, patterns: &Patterns, live: bool) -> Vec<Value> {
    r.tiers
        .iter()
        .map(|t| {
            let cands: Vec<Value> = t
                .candidates
                .iter()
                .map(|cd| {
                    let ch = &snap.table.channels[cd.channel];
                    let mut v = if live {
                        let mut v = channel_view(snap, cd.channel, ch);
                        // R19.1: this replica's moving scores of the target, streamed and
                        // non-stream (null: unscored).
                        let st = &snap.states[cd.channel];
                        let m = &cd.upstream_model;
                        v["score"] = json!({"stream": st.scores.get(m, true), "non_stream": st.scores.get(m, false)});
                        v["active_probe"] = probe_view(ch, st, &cd.upstream_model);
                        v
                    } else {
                        config_view(ch)
                    };
                    v["upstream_model"] = json!(cd.upstream_model.as_ref());
                    v["effective_weight"] = json!(cd.weight);
                    let pat = patterns.iter().find(|(c, _)| *c == cd.channel);
                    v["matched_pattern"] = json!(pat.map(|(_, p)| p.as_ref()));
                    v["client_formats"] = client_formats(ch);
                    v
                })
                .collect();
            json!({"priority": t.priority, "candidates": cands})
        })
        .collect()
}

/// R19.2: the candidate's active probe — configured, and whether its breaker (the
/// channel's or, under `scope: model`, the target's) is being probed now.
fn probe_view(
    ch: &crate::config::model::Channel,
    st: &crate::state::channel::ChannelState,
    model: &str,
) -> Value {
    let probe = &ch.resilience.active_probe;
    let now = tokio::time::Instant::now();
    let scope = crate::state::outcome::scope(ch, model).map(str::to_string);
    let wanted = crate::state::outcome::wanting_probe(ch, st, now);
    let probing = probe.enabled && ch.enabled && !st.is_disabled() && wanted.contains(&scope);
    json!({"enabled": probe.enabled, "interval_ms": probe.interval.as_millis() as u64, "probing": probing})
}

/// One attempt order the plan could give if every attempt failed over.
fn sample_order(
    snap: &Snapshot,
    routes: &[(Arc<str>, Arc<Route>)],
    cross_group_retry: bool,
) -> Vec<Value> {
    let refs: Vec<(&str, &Route)> = routes.iter().map(|(g, r)| (&**g, r.as_ref())).collect();
    let mut rng = fastrand::Rng::new();
    let key_count = |id: usize| snap.table.channels[id].keys.len();
    let key_start = |_id: usize| 0;
    let now = tokio::time::Instant::now();
    let available = |id: usize, upstream: &str| {
        crate::state::outcome::available(&snap.table.channels[id], &snap.states[id], upstream, now)
    };
    // The sample order is a non-stream request's.
    let score = |id: usize, upstream: &str| snap.states[id].scores.get(upstream, false);
    let by_latency = snap.table.config.routing.balance == Balance::Latency;
    let mut plan = AttemptPlan::new(
        &PlanInput {
            groups: &refs,
            tier_walk: snap.table.config.routing.tier_walk,
            retry_times: snap.table.config.routing.retry_times,
            cross_group_retry,
            key_count: &key_count,
            key_cursor: &key_start,
            available: &available,
            preferred: None,
            weight_scale: None,
            native: None,
            score: by_latency.then_some(&score as &dyn Fn(usize, &str) -> Option<Score>),
        },
        &mut rng,
    );
    let mut order = Vec::new();
    let fail = Decision::FailOver { key_fault: false };
    let mut last = None;
    while let Some(step) = plan.next(last.as_ref()) {
        order.push(json!({"group": routes[step.group].0, "channel": snap.table.channels[step.channel].name, "key_index": step.key_index, "upstream_model": step.upstream_model.as_ref()}));
        last = Some(fail);
    }
    order
}
