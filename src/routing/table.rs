//! `RouteTable`: the immutable, compiled routing table swapped in by reload (R2.3, R3).
//!
//! Built once per config load by [`compile`]; the request path only looks things up.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::model::{Channel, Client, Config};
use crate::fastmap::FastMap;

/// Index of a channel in `RouteTable::channels` (valid for one table only;
/// runtime state is keyed by channel *name*, never by this id).
pub type ChannelId = usize;

/// One candidate of a tier: a channel, the model name sent upstream, and its
/// effective draw weight (after the weight-0 and small-weight rules of R3.3).
#[derive(Debug, Clone)]
pub struct TierTarget {
    pub channel: ChannelId,
    pub upstream_model: Arc<str>,
    pub weight: u64,
}

/// Channels of one priority; tiers are ordered highest priority first.
#[derive(Debug, Clone)]
pub struct Tier {
    pub priority: i64,
    pub candidates: Vec<TierTarget>,
}

/// The candidates for one (group, public model) or (group, pass-through path).
#[derive(Debug, Clone, Default)]
pub struct Route {
    pub tiers: Vec<Tier>,
    /// `virtual_models.*.stream_resume`: the virtual model's own setting, which wins over
    /// the committed channel's `resilience.stream_resume`.
    pub stream_resume: Option<crate::config::model::StreamResume>,
}

impl Route {
    /// A route of these tiers with no setting of its own.
    pub fn of(tiers: Vec<Tier>) -> Route {
        Route {
            tiers,
            stream_resume: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tiers.iter().all(|t| t.candidates.is_empty())
    }
}

/// The compiled table. Immutable once built.
#[derive(Debug)]
pub struct RouteTable {
    pub generation: u64,
    pub config: Arc<Config>,
    /// All channels, sorted by name; `ChannelId` indexes this.
    pub channels: Vec<Arc<Channel>>,
    /// (group, public model) → route. Includes virtual models.
    pub routes: FastMap<(String, String), Arc<Route>>,
    /// (group, pass-through path) → route, for `channels.*.paths`.
    pub paths: FastMap<(String, String), Arc<Route>>,
    /// SHA-256 of a client key → index into `clients`.
    pub client_by_hash: FastMap<[u8; 32], usize>,
    pub clients: Vec<Arc<Client>>,
    /// group → sorted public model names reachable in it (for `GET /v1/models`).
    pub models_by_group: HashMap<String, Vec<String>>,
    /// group → model patterns (`claude-*`) served in it, one entry per (channel, pattern).
    pub patterns: HashMap<String, Vec<PatternEntry>>,
}

/// One channel's model pattern in one group (`channels.*.models` entries holding `*`).
#[derive(Debug, Clone)]
pub struct PatternEntry {
    /// The pattern as written, e.g. `claude-*`.
    pub pattern: Arc<str>,
    pub regex: regex::Regex,
    pub channel: ChannelId,
    pub priority: i64,
    pub weight: u32,
    /// `model_mapping[pattern]`; `None` sends the client's model name unchanged.
    pub upstream: Option<Arc<str>>,
}

/// How a requested model found its route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelMatch {
    /// A configured name (or a virtual model): exact names always win over patterns.
    Exact,
    /// Through patterns: (channel, the pattern that matched) for each candidate.
    Pattern(Vec<(ChannelId, Arc<str>)>),
}

impl RouteTable {
    /// The route of `model` in `group`: the exact name when some channel or virtual model
    /// serves it, else every channel of the group whose pattern matches it (R3, B-model-patterns).
    pub fn model_route(&self, group: &str, model: &str) -> Option<(Arc<Route>, ModelMatch)> {
        if let Some(r) = self.routes.get(super::pair::key(&(group, model))) {
            return Some((r.clone(), ModelMatch::Exact));
        }
        let entries = self.patterns.get(group)?;
        let mut matched: Vec<&PatternEntry> = Vec::new();
        for e in entries {
            if !matched.iter().any(|m| m.channel == e.channel) && e.regex.is_match(model) {
                matched.push(e);
            }
        }
        if matched.is_empty() {
            return None;
        }
        let why = matched
            .iter()
            .map(|e| (e.channel, e.pattern.clone()))
            .collect();
        let route = super::compile::pattern_route(&matched, model);
        Some((Arc::new(route), ModelMatch::Pattern(why)))
    }

    /// Whether `model` is served to `group`, exactly or by a pattern.
    pub fn serves(&self, group: &str, model: &str) -> bool {
        self.routes.contains_key(super::pair::key(&(group, model)))
            || self
                .patterns
                .get(group)
                .is_some_and(|es| es.iter().any(|e| e.regex.is_match(model)))
    }
}
