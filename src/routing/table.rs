//! `RouteTable`: the immutable, compiled routing table swapped in by reload (R2.3, R3).
//!
//! Built once per config load by [`compile`]; the request path only looks things up.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::model::{Channel, Client, Config};

/// Index of a channel in `RouteTable::channels` (valid for one table only;
/// runtime state is keyed by channel *name*, never by this id).
pub type ChannelId = usize;

/// One candidate of a tier: a channel, the model name sent upstream, and its
/// effective draw weight (after the weight-0 and small-weight rules of R3.3).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub channel: ChannelId,
    pub upstream_model: Arc<str>,
    pub weight: u64,
}

/// Channels of one priority; tiers are ordered highest priority first.
#[derive(Debug, Clone)]
pub struct Tier {
    pub priority: i64,
    pub candidates: Vec<Candidate>,
}

/// The candidates for one (group, public model) or (group, pass-through path).
#[derive(Debug, Clone, Default)]
pub struct Route {
    pub tiers: Vec<Tier>,
}

impl Route {
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
    pub routes: HashMap<(String, String), Arc<Route>>,
    /// (group, pass-through path) → route, for `channels.*.paths`.
    pub paths: HashMap<(String, String), Arc<Route>>,
    /// SHA-256 of a client key → index into `clients`.
    pub client_by_hash: HashMap<[u8; 32], usize>,
    pub clients: Vec<Arc<Client>>,
    /// group → sorted public model names reachable in it (for `GET /v1/models`).
    pub models_by_group: HashMap<String, Vec<String>>,
}
