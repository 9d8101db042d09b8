//! Bindings across restarts (R8.3): a periodic snapshot of changed bindings to SQLite and a
//! restore at start-up.
//!
//! Every `SNAPSHOT_EVERY` the task sweeps expired bindings and writes each binding written
//! or refreshed since the last snapshot; a final snapshot runs at shutdown, before the store
//! is flushed. Rows carry the wall-clock expiry; the key column is
//! `<kind>:<32 hex digits of the key hash>` (never a raw id). At start-up the rows that have
//! not expired are loaded back with their remaining TTL. A binding refreshed less than one
//! period before a crash restarts with its previous expiry: at worst one period of TTL is
//! lost, which only costs a cache miss.
//!
//! # Bounded (B-affinity-bounded)
//! A snapshot takes the changes of one shard at a time and writes them in batches of
//! [`BATCH`] rows, one queue slot per batch, waiting for each batch to be committed before
//! sending the next: it goes at the writer's pace, never fills the queue (live request-log
//! writes keep their room) and drops nothing. Memory: a binding costs about 120 bytes in the
//! store (its map entry and its channel-name allocation; measured by
//! `tests/affinity_snapshot.rs`), so about 120 MiB at the 1,048,576 cap; on top of that a
//! snapshot holds one shard's changed bindings (at most `PER_SHARD_CAP` = 32,768 × 64 bytes
//! ≈ 2 MiB) and one batch of rows (≈ 120 KiB), whatever the number of changes (200,000
//! changes: under 1 MiB). While the database cannot grow (disk full) the snapshot waits for
//! the next period, keeping the rest marked changed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::key::StickyKind;
use super::store::Bindings;
use crate::store::{AffinityBinding, Store, WriteOp};

pub const SNAPSHOT_EVERY: Duration = Duration::from_secs(30);
/// Rows per write (one queue slot, one transaction at most).
pub const BATCH: usize = 1024;

/// The SQLite key of a binding.
pub fn row_key(kind: StickyKind, hash: u128) -> String {
    format!("{}:{hash:032x}", kind.as_str())
}

/// Inverse of [`row_key`].
pub fn parse_row_key(row_key: &str) -> Option<(StickyKind, u128)> {
    let (kind, hash) = row_key.split_once(':')?;
    Some((
        StickyKind::parse(kind)?,
        u128::from_str_radix(hash, 16).ok()?,
    ))
}

fn wall_ms() -> i64 {
    crate::store::now_ms()
}

/// Write every changed binding, shard by shard, batch by batch, each batch committed
/// before the next is sent. Returns how many rows were written.
pub async fn snapshot(bindings: &Bindings, store: &Store) -> usize {
    let mut written = 0;
    for shard in 0..bindings.shard_count() {
        if store.is_full() {
            tracing::warn!(
                written = written,
                "affinity snapshot paused: the database cannot grow; the rest waits for the next period"
            );
            return written;
        }
        let dirty = bindings.take_dirty_shard(shard);
        for chunk in dirty.chunks(BATCH) {
            let now = Instant::now();
            let wall = wall_ms();
            let rows: Vec<AffinityBinding> = chunk
                .iter()
                .map(|(hash, bind)| AffinityBinding {
                    key: row_key(bind.kind, *hash),
                    channel: bind.channel.to_string(),
                    expires_ms: wall.saturating_add(
                        i64::try_from(bind.expires.saturating_duration_since(now).as_millis())
                            .unwrap_or(i64::MAX),
                    ),
                })
                .collect();
            let len = rows.len();
            if store
                .send_durable_async(WriteOp::AffinityBindings(rows))
                .await
                .is_err()
                || store.flush().await.is_err()
            {
                return written; // the store is closed
            }
            written += len;
        }
    }
    written
}

/// Load the stored bindings that have not expired; returns how many were restored.
pub async fn restore(bindings: &Bindings, store: &Store) -> usize {
    let wall = wall_ms();
    let rows = match store.affinity_bindings(wall).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "affinity bindings not restored");
            return 0;
        }
    };
    let now = Instant::now();
    let mut loaded = 0;
    for r in rows {
        let Some((kind, hash)) = parse_row_key(&r.key) else {
            continue;
        };
        let left = Duration::from_millis(r.expires_ms.saturating_sub(wall).max(0) as u64);
        bindings.put(hash, kind, &r.channel, now + left, false);
        loaded += 1;
    }
    loaded
}

/// The periodic sweep + snapshot task; snapshots once more when `stop` turns true.
pub async fn run(bindings: Arc<Bindings>, store: Store, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(SNAPSHOT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                bindings.sweep();
                snapshot(&bindings, &store).await;
            }
            r = stop.changed() => {
                if r.is_err() || *stop.borrow() {
                    snapshot(&bindings, &store).await;
                    return;
                }
            }
        }
    }
}
