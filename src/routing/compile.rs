//! Compile a validated `Config` into an immutable `RouteTable` (R2.3, R3.2–R3.4).
//!
//! Architecture Invariant: everything the request path needs is precomputed here —
//! tiers sorted by priority, effective weights, upstream model names, client key hashes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::table::{ChannelId, PatternEntry, Route, RouteTable, Tier, TierTarget};
use super::weighted::effective_weights;
use crate::config::load::scalars::{glob_regex, is_pattern};
use crate::config::model::{Channel, ClientKey, Config};
use crate::fastmap::FastMap;

/// Raw (priority → candidates with raw weights) for one route while building.
type Building = BTreeMap<i64, Vec<(ChannelId, Arc<str>, u32)>>;

/// (group, model) or (group, path) → the route being built.
type Routes = HashMap<(String, String), Building>;

/// Build the table. Infallible: the config has been validated.
pub fn compile(config: Arc<Config>, generation: u64) -> RouteTable {
    let channels: Vec<_> = config.channels.iter().cloned().map(Arc::new).collect();
    let mut routes = Routes::new();
    let mut paths = Routes::new();
    let mut patterns: HashMap<String, Vec<PatternEntry>> = HashMap::new();
    for (id, ch) in channels.iter().enumerate().filter(|(_, c)| c.enabled) {
        for group in &ch.groups {
            channel_routes(id, ch, group, &mut routes, &mut paths, &mut patterns);
        }
    }
    virtual_routes(&config, &channels, &mut routes);
    let mut routes = finish(routes);
    for vm in &config.virtual_models {
        for group in &vm.groups {
            if let Some(r) = routes.get_mut(&(group.clone(), vm.name.clone())) {
                Arc::make_mut(r).stream_resume = vm.stream_resume;
            }
        }
    }
    let mut models_by_group: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (group, model) in routes.keys() {
        models_by_group
            .entry(group.clone())
            .or_default()
            .insert(model.clone());
    }
    let clients: Vec<_> = config.clients.iter().cloned().map(Arc::new).collect();
    let client_by_hash = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let key_hash = match &c.key {
                ClientKey::Plain(s) => hash_key(s.expose().as_bytes()),
                ClientKey::Sha256(key_hash) => *key_hash,
            };
            (key_hash, i)
        })
        .collect();
    RouteTable {
        generation,
        channels,
        routes,
        paths: finish(paths),
        client_by_hash,
        clients,
        models_by_group: models_by_group
            .into_iter()
            .map(|(g, s)| (g, s.into_iter().collect()))
            .collect(),
        patterns,
        config,
    }
}

/// What channel `id` adds in `group`: its model patterns, its models (by their mapped
/// upstream names) and its declared paths, at its priority and weight.
fn channel_routes(
    id: ChannelId,
    ch: &Channel,
    group: &str,
    routes: &mut Routes,
    paths: &mut Routes,
    patterns: &mut HashMap<String, Vec<PatternEntry>>,
) {
    for model in ch.models.iter().filter(|m| is_pattern(m)) {
        // Validation compiled every pattern once already; none fails here.
        let Some(regex) = glob_regex(model) else {
            continue;
        };
        patterns
            .entry(group.to_string())
            .or_default()
            .push(PatternEntry {
                pattern: model.as_str().into(),
                regex,
                channel: id,
                priority: ch.priority,
                weight: ch.weight,
                upstream: ch.model_mapping.get(model).map(|u| u.as_str().into()),
            });
    }
    for model in ch.models.iter().filter(|m| !is_pattern(m)) {
        let upstream: Arc<str> = ch.model_mapping.get(model).unwrap_or(model).as_str().into();
        routes
            .entry((group.to_string(), model.clone()))
            .or_default()
            .entry(ch.priority)
            .or_default()
            .push((id, upstream, ch.weight));
    }
    for path in &ch.paths {
        paths
            .entry((group.to_string(), path.clone()))
            .or_default()
            .entry(ch.priority)
            .or_default()
            .push((id, Arc::from(""), ch.weight));
    }
}

/// Virtual models (R3.4): target i becomes its own tier, earlier = higher.
fn virtual_routes(config: &Config, channels: &[Arc<Channel>], routes: &mut Routes) {
    let by_name: HashMap<&str, ChannelId> = channels
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    for vm in &config.virtual_models {
        let n = vm.targets.len() as i64;
        for group in &vm.groups {
            let tiers = routes.entry((group.clone(), vm.name.clone())).or_default();
            for (i, target) in vm.targets.iter().enumerate() {
                let Some(&id) = by_name.get(target.channel.as_str()) else {
                    continue;
                };
                if !channels[id].enabled {
                    continue;
                }
                tiers.entry(n - i as i64).or_default().push((
                    id,
                    target.model.as_str().into(),
                    100,
                ));
            }
        }
    }
}

/// The route of a model served through patterns: the matched channels in priority tiers,
/// each sending the mapped upstream name or the client's model unchanged.
pub fn pattern_route(matched: &[&PatternEntry], model: &str) -> Route {
    let mut tiers: Building = BTreeMap::new();
    for entry in matched {
        let up = entry.upstream.clone().unwrap_or_else(|| model.into());
        tiers
            .entry(entry.priority)
            .or_default()
            .push((entry.channel, up, entry.weight));
    }
    route_of(tiers)
}

/// SHA-256 of a client key, the lookup key of `client_by_hash`.
pub fn hash_key(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
}

fn finish(b: HashMap<(String, String), Building>) -> FastMap<(String, String), Arc<Route>> {
    b.into_iter()
        .filter(|(_, tiers)| !tiers.is_empty())
        .map(|(k, tiers)| (k, Arc::new(route_of(tiers))))
        .collect()
}

fn route_of(tiers: Building) -> Route {
    let tiers = tiers
        .into_iter()
        .rev() // highest priority first
        .map(|(priority, cands)| {
            let raw: Vec<u32> = cands.iter().map(|c| c.2).collect();
            let eff = effective_weights(&raw);
            let candidates = cands
                .into_iter()
                .zip(eff)
                .map(|((channel, upstream_model, _), weight)| TierTarget {
                    channel,
                    upstream_model,
                    weight,
                })
                .collect();
            Tier {
                priority,
                candidates,
            }
        })
        .collect();
    Route {
        tiers,
        stream_resume: None,
    }
}
