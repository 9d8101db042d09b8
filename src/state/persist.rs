//! Durable, ordered persistence of disabled/enabled state (R7.2).
//!
//! Every change of a channel's or key's disabled state — auto-disable, probe re-enable,
//! operator enable/disable — goes through its channel's [`Persister`]. None is ever dropped
//! when the store queue is full (outages are exactly when it fills, and a lost "enable"
//! would come back at restart), none blocks the request path, and the last change of a
//! (channel, key) is the one stored:
//!
//! - With nothing pending, a row is offered to the queue at once ([`Store::offer`]).
//! - When the queue is full, or rows are already pending, the row goes to a small map keyed
//!   by its [`StateKey`] (a later change of the same key replaces the pending one), and one
//!   drain task hands the pending rows to the store with [`Store::send_durable_async`],
//!   which waits for room. A row is never sent before an earlier row of the same key.
//!
//! The pending map is bounded by the channel's keys (plus the channel itself).

use crate::lock::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::store::{StateKey, StateRow as Row, Store, WriteOp};

#[derive(Debug, Default)]
struct Pending {
    rows: BTreeMap<StateKey, Row>,
    /// A drain task is running (it clears this when it leaves with nothing pending).
    draining: bool,
}

/// The state rows of one channel on their way to SQLite.
#[derive(Debug, Default)]
pub struct Persister {
    inner: Arc<Mutex<Pending>>,
}

impl Persister {
    /// Queue `row` durably, after every earlier row of this channel with the same key.
    pub fn send(&self, store: &Store, row: Row) {
        let mut pending = lock(&self.inner);
        let row = if pending.rows.is_empty() && !pending.draining {
            match store.offer(row) {
                None => return,
                Some(WriteOp::StateRow(row)) => row,
                Some(_) => return,
            }
        } else {
            row
        };
        pending.rows.insert(row.key.clone(), row);
        if pending.draining {
            return;
        }
        pending.draining = true;
        drop(pending);
        let (inner, store) = (self.inner.clone(), store.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(drain(inner, store));
            }
            // No runtime (a blocking caller): wait for room right here.
            Err(_) => drain_blocking(&inner, &store),
        }
    }

    /// Rows waiting for room in the store queue.
    pub fn pending(&self) -> usize {
        lock(&self.inner).rows.len()
    }
}

/// Take everything pending, or end the drain (under the same lock, so no row is stranded).
fn take(inner: &Mutex<Pending>) -> Option<BTreeMap<StateKey, Row>> {
    let mut pending = lock(inner);
    if pending.rows.is_empty() {
        pending.draining = false;
        return None;
    }
    Some(std::mem::take(&mut pending.rows))
}

async fn drain(inner: Arc<Mutex<Pending>>, store: Store) {
    while let Some(rows) = take(&inner) {
        for row in rows.into_values() {
            let (channel, key) = (row.channel.clone(), row.key.clone());
            if let Err(e) = store.send_durable_async(row).await {
                tracing::error!(error = %e, channel, ?key, "channel state not stored");
            }
        }
    }
}

fn drain_blocking(inner: &Mutex<Pending>, store: &Store) {
    while let Some(rows) = take(inner) {
        for row in rows.into_values() {
            let (channel, key) = (row.channel.clone(), row.key.clone());
            if let Err(e) = store.send_durable(row) {
                tracing::error!(error = %e, channel, ?key, "channel state not stored");
            }
        }
    }
}

#[cfg(test)]
#[path = "persist_tests.rs"]
mod tests;
