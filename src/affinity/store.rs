//! The binding store (R8.3): sticky key hash → channel name, sharded, bounded, TTL-expired.
//!
//! - `SHARDS` shards, each a `Mutex<HashMap>`; a key's shard is picked from its hash, so
//!   concurrent requests rarely meet on a lock, and a lock is held only for one map operation.
//! - Bounded: at most `PER_SHARD_CAP` entries per shard (32 × 32,768 = 1,048,576 in all).
//!   Inserting a new key into a full shard first drops the shard's expired entries; if it
//!   is still full, the entry that expires soonest is evicted.
//! - Expiry by TTL on `tokio::time::Instant`: lazily on read, and by [`Bindings::sweep`],
//!   which the snapshot task runs periodically.
//! - Keyed by channel *name*, so a binding survives a reload for an unchanged name.
//! - Shared (R17.1): with a sink attached, a new or moved binding is announced at once and
//!   a refresh when it extends the expiry last announced by more than
//!   [`REFRESH_SHARE_FRACTION`] of its TTL — so another replica's copy expires at most
//!   that fraction of the TTL early, and a hot key costs no message per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use super::key::{StickyKey, StickyKind};

pub const SHARDS: usize = 32;
pub const PER_SHARD_CAP: usize = 32_768;
/// A refresh is announced once it extends the shared expiry by more than TTL / this.
pub const REFRESH_SHARE_FRACTION: u32 = 16;

/// One binding as seen from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub channel: Arc<str>,
    pub kind: StickyKind,
    pub expires: Instant,
}

#[derive(Debug)]
struct Entry {
    b: Binding,
    /// Changed since the last snapshot.
    dirty: bool,
    /// The expiry the other replicas know of (announced or received).
    shared_until: Instant,
}

type Shard = HashMap<u128, Entry>;

#[derive(Debug)]
pub struct Bindings {
    shards: Vec<Mutex<Shard>>,
    cap: usize,
    /// Where bindings are announced when state is shared.
    sync: crate::state::sync::Hook,
}

impl Default for Bindings {
    fn default() -> Self {
        Bindings::with_capacity(SHARDS, PER_SHARD_CAP)
    }
}

impl Bindings {
    /// `shards` maps of at most `per_shard` entries each (both at least 1).
    pub fn with_capacity(shards: usize, per_shard: usize) -> Self {
        Bindings {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            cap: per_shard.max(1),
            sync: Default::default(),
        }
    }

    fn shard(&self, key: u128) -> MutexGuard<'_, Shard> {
        let i = (key % self.shards.len() as u128) as usize;
        // A poisoned lock only means a panic mid-update of plain data; keep serving.
        crate::lock::lock(&self.shards[i])
    }

    /// The live binding of `key` (an expired one is removed and not returned).
    pub fn get(&self, key: u128) -> Option<Binding> {
        let mut shard = self.shard(key);
        match shard.get(&key) {
            Some(e) if e.b.expires > crate::clock::instant() => Some(e.b.clone()),
            Some(_) => {
                shard.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Write or refresh the binding of `key` to `channel` for `key.ttl` (call only after a
    /// success, R8.3).
    pub fn bind(&self, key: &StickyKey, channel: &str) {
        let expires = crate::clock::instant() + key.ttl;
        let announce = self.sync.is_attached();
        let step = key.ttl / REFRESH_SHARE_FRACTION;
        let told = self.insert(key.hash, key.kind, channel, expires, true, |old| {
            announce && old.is_none_or(|(c, shared)| c != channel || expires > shared + step)
        });
        if let Some(channel) = told {
            self.sync.emit(|| crate::state::sync::Change::Bound {
                hash: key.hash,
                kind: key.kind.as_str(),
                channel,
                ttl: key.ttl,
            });
        }
    }

    /// Announce bindings to other replicas through `sink` (R17.1).
    pub fn share(&self, sink: Arc<dyn crate::state::sync::Sink>) {
        self.sync.attach(sink);
    }

    /// A binding another replica made or refreshed (not announced again, not persisted).
    pub fn apply(&self, hash: u128, kind: StickyKind, channel: &str, expires: Instant) {
        self.insert(hash, kind, channel, expires, false, |_| true);
    }

    /// Insert with an explicit expiry; `dirty: false` for a binding already persisted
    /// (restore at start-up).
    pub fn put(&self, hash: u128, kind: StickyKind, channel: &str, expires: Instant, dirty: bool) {
        self.insert(hash, kind, channel, expires, dirty, |_| false);
    }

    /// Write an entry. `share` sees the old (channel, shared expiry) and says whether the
    /// new expiry becomes the shared one; then the channel is returned (to announce).
    fn insert(
        &self,
        hash: u128,
        kind: StickyKind,
        channel: &str,
        expires: Instant,
        dirty: bool,
        share: impl FnOnce(Option<(&str, Instant)>) -> bool,
    ) -> Option<Arc<str>> {
        let mut shard = self.shard(hash);
        if let Some(e) = shard.get_mut(&hash) {
            let told = share(Some((&e.b.channel, e.shared_until)));
            if &*e.b.channel != channel {
                e.b.channel = Arc::from(channel);
            }
            e.b.kind = kind;
            e.b.expires = expires;
            e.dirty = dirty;
            if told {
                e.shared_until = expires;
                return Some(e.b.channel.clone());
            }
            return None;
        }
        let told = share(None);
        if shard.len() >= self.cap {
            let now = Instant::now();
            shard.retain(|_, e| e.b.expires > now);
            if shard.len() >= self.cap {
                if let Some(k) = shard
                    .iter()
                    .min_by_key(|(_, e)| e.b.expires)
                    .map(|(k, _)| *k)
                {
                    shard.remove(&k);
                }
            }
        }
        let binding = Binding {
            channel: Arc::from(channel),
            kind,
            expires,
        };
        let out = told.then(|| binding.channel.clone());
        shard.insert(
            hash,
            Entry {
                b: binding,
                dirty,
                shared_until: expires,
            },
        );
        out
    }

    /// Every live binding (to announce them again after Redis lost its data).
    pub fn live(&self) -> Vec<(u128, Binding)> {
        let now = Instant::now();
        let mut out = Vec::new();
        for sh in &self.shards {
            let shard = crate::lock::lock(sh);
            out.extend(
                shard
                    .iter()
                    .filter(|(_, e)| e.b.expires > now)
                    .map(|(k, e)| (*k, e.b.clone())),
            );
        }
        out
    }

    /// Drop the binding of `key` if it still points at `channel` (a removed channel).
    pub fn forget(&self, key: u128, channel: &str) {
        let mut shard = self.shard(key);
        if shard.get(&key).is_some_and(|e| &*e.b.channel == channel) {
            shard.remove(&key);
        }
    }

    /// Remove every expired binding; returns how many were removed.
    pub fn sweep(&self) -> usize {
        let now = Instant::now();
        let mut removed = 0;
        for sh in &self.shards {
            let mut shard = crate::lock::lock(sh);
            let before = shard.len();
            shard.retain(|_, e| e.b.expires > now);
            removed += before - shard.len();
        }
        removed
    }

    /// Live and expired-but-not-swept entries.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| crate::lock::lock(s).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of shards (for [`Bindings::take_dirty_shard`]).
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Like [`Bindings::take_dirty`] for one shard only, so a snapshot holds at most one
    /// shard's changes at a time.
    pub fn take_dirty_shard(&self, shard: usize) -> Vec<(u128, Binding)> {
        let Some(sh) = self.shards.get(shard) else {
            return Vec::new();
        };
        let now = Instant::now();
        let mut shard = crate::lock::lock(sh);
        let mut out = Vec::new();
        for (k, e) in shard.iter_mut().filter(|(_, e)| e.dirty) {
            e.dirty = false;
            if e.b.expires > now {
                out.push((*k, e.b.clone()));
            }
        }
        out
    }

    /// Bindings changed since the last call (live ones only); clears their dirty mark.
    pub fn take_dirty(&self) -> Vec<(u128, Binding)> {
        let now = Instant::now();
        let mut out = Vec::new();
        for sh in &self.shards {
            let mut shard = crate::lock::lock(sh);
            for (k, e) in shard.iter_mut().filter(|(_, e)| e.dirty) {
                e.dirty = false;
                if e.b.expires > now {
                    out.push((*k, e.b.clone()));
                }
            }
        }
        out
    }
}
