//! Bindings across restarts (R8.3): a periodic snapshot of changed bindings to SQLite
//! (`WriteOp::AffinityBinding`) and a restore at start-up.
//!
//! Every `SNAPSHOT_EVERY` the task sweeps expired bindings and queues each binding written
//! or refreshed since the last snapshot; a final snapshot runs at shutdown, before the
//! store is flushed. Rows carry the wall-clock expiry; the key column is
//! `<kind>:<32 hex digits of the key hash>` (never a raw id). At start-up the rows that
//! have not expired are loaded back with their remaining TTL. A binding refreshed less
//! than one period before a crash restarts with its previous expiry: at worst one
//! period of TTL is lost, which only costs a cache miss.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::key::StickyKind;
use super::store::Bindings;
use crate::store::{AffinityBinding, Store};

pub const SNAPSHOT_EVERY: Duration = Duration::from_secs(30);

/// The SQLite key of a binding.
pub fn row_key(kind: StickyKind, hash: u128) -> String {
    format!("{}:{hash:032x}", kind.as_str())
}

/// Inverse of [`row_key`].
pub fn parse_row_key(s: &str) -> Option<(StickyKind, u128)> {
    let (k, h) = s.split_once(':')?;
    Some((StickyKind::parse(k)?, u128::from_str_radix(h, 16).ok()?))
}

fn wall_ms() -> i64 {
    crate::store::now_ms()
}

/// Queue every changed binding; returns how many were queued.
pub fn snapshot(b: &Bindings, store: &Store) -> usize {
    let now = Instant::now();
    let wall = wall_ms();
    let mut n = 0;
    for (hash, bind) in b.take_dirty() {
        let left = bind.expires.saturating_duration_since(now);
        let row = AffinityBinding {
            key: row_key(bind.kind, hash),
            channel: bind.channel.to_string(),
            expires_ms: wall.saturating_add(left.as_millis() as i64),
        };
        if store.try_send(row) {
            n += 1;
        }
    }
    n
}

/// Load the stored bindings that have not expired; returns how many were restored.
pub async fn restore(b: &Bindings, store: &Store) -> usize {
    let wall = wall_ms();
    let rows = match store.affinity_bindings(wall).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "affinity bindings not restored");
            return 0;
        }
    };
    let now = Instant::now();
    let mut n = 0;
    for r in rows {
        let Some((kind, hash)) = parse_row_key(&r.key) else {
            continue;
        };
        let left = Duration::from_millis(r.expires_ms.saturating_sub(wall).max(0) as u64);
        b.put(hash, kind, &r.channel, now + left, false);
        n += 1;
    }
    n
}

/// The periodic sweep + snapshot task; snapshots once more when `stop` turns true.
pub async fn run(bindings: Arc<Bindings>, store: Store, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SNAPSHOT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                bindings.sweep();
                snapshot(&bindings, &store);
            }
            r = stop.changed() => {
                if r.is_err() || *stop.borrow() {
                    snapshot(&bindings, &store);
                    return;
                }
            }
        }
    }
}
