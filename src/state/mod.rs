//! Runtime state that outlives a reload: kept outside the `RouteTable`, keyed by channel name (R2.5).
//!
//! Architecture Invariant: nothing here is stored inside a `RouteTable`; a reload re-binds
//! each table's channels to the same state objects by name, so breakers, disabled keys and
//! key cursors survive for every channel whose name is unchanged.
pub mod autodisable;
pub mod breaker;
pub mod channel;
pub mod cooldown;
pub mod health;
pub mod outcome;
pub mod probe;
pub mod restore;

pub use channel::{ChannelState, Registry};

use std::sync::Arc;

use crate::routing::table::{ChannelId, RouteTable};

/// What a request loads once (`ArcSwap::load_full`): a table and the state of its channels,
/// indexed by `ChannelId`.
#[derive(Debug)]
pub struct Snapshot {
    pub table: RouteTable,
    pub states: Vec<Arc<ChannelState>>,
}

impl Snapshot {
    pub fn new(table: RouteTable, registry: &Registry) -> Snapshot {
        let states = registry.bind(&table);
        Snapshot { table, states }
    }

    pub fn state(&self, id: ChannelId) -> &ChannelState {
        &self.states[id]
    }
}
