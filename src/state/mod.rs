//! Runtime state that outlives a reload: kept outside the `RouteTable`, keyed by channel name (R2.5).
//!
//! Architecture Invariant: nothing here is stored inside a `RouteTable`; a reload re-binds
//! each table's channels to the same state objects by name, so breakers, disabled keys and
//! key cursors survive for every channel whose name is unchanged.
//!
//! Architecture Invariant: state follows identity. A key's state is keyed by its
//! fingerprint ([`KeyFp`]), never by its position in the list; a model breaker or a
//! "model not found" mark by the *upstream* model of the candidate (from the config), never
//! by a client-chosen string; every map that a request can add to is bounded.
pub mod autodisable;
pub mod breaker;
pub mod channel;
pub mod cooldown;
pub mod health;
pub mod keys;
pub mod models;
pub mod operator;
pub mod outcome;
pub mod persist;
pub mod probe;
pub mod responses_path;
pub mod restore;
pub mod score;
pub mod sync;
mod view;
mod visits;

pub use channel::{ChannelState, Registry};
pub use keys::KeyFp;

use std::sync::Arc;

use crate::routing::table::{ChannelId, RouteTable};

/// What a request loads once (`ArcSwap::load_full`): a table, the state of its channels and
/// the fingerprints of their keys, indexed by `ChannelId`.
#[derive(Debug)]
pub struct Snapshot {
    pub table: RouteTable,
    pub states: Vec<Arc<ChannelState>>,
    /// Each channel's key fingerprints, in key order (computed once per table).
    pub key_fps: Vec<Arc<[KeyFp]>>,
}

impl Snapshot {
    pub fn new(table: RouteTable, registry: &Registry) -> Snapshot {
        let states = registry.bind(&table);
        let key_fps = table
            .channels
            .iter()
            .map(|c| keys::fingerprints(&c.keys))
            .collect();
        Snapshot {
            table,
            states,
            key_fps,
        }
    }

    pub fn state(&self, id: ChannelId) -> &ChannelState {
        &self.states[id]
    }

    /// The fingerprint of key `key` of channel `id`.
    pub fn key_fp(&self, id: ChannelId, key: usize) -> Option<KeyFp> {
        self.key_fps.get(id)?.get(key).copied()
    }
}
