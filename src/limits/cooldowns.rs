//! Upstream key cool-downs learned from rate-limit answers (R15.3): channel name + key
//! fingerprint → "cooling until", bounded by a configured maximum, sharded, bounded in size,
//! expired lazily and by `sweep`. One key cools; its channel and model do not. With shared
//! state (R17.1) a new or longer cool-down is announced to the other replicas, and theirs
//! are applied here with [`KeyCooldowns::apply`].

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::subject::{OwnedSubject, Subject, SubjectView};

const SHARDS: usize = 16;
/// Keys tracked at most (they come from config; this bounds a pathological one).
pub const MAX_KEYS: usize = 65_536;

type Shard = HashMap<OwnedSubject, Instant>;

/// Cooling upstream keys.
#[derive(Debug)]
pub struct KeyCooldowns {
    shards: Box<[RwLock<Shard>]>,
    per_shard: usize,
    hasher: RandomState,
    sync: crate::state::sync::Hook,
    /// Entries held (expired ones not yet swept included): zero lets a planner skip the
    /// lookups with one atomic load.
    entries: AtomicUsize,
}

impl Default for KeyCooldowns {
    fn default() -> Self {
        KeyCooldowns::with_capacity(MAX_KEYS)
    }
}

impl KeyCooldowns {
    /// A store of at most `max_keys` cooling keys.
    pub fn with_capacity(max_keys: usize) -> Self {
        KeyCooldowns {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            hasher: RandomState::new(),
            sync: Default::default(),
            entries: AtomicUsize::new(0),
        }
    }

    /// Announce cool-downs to other replicas through `sink` (R17.1).
    pub fn share(&self, sink: std::sync::Arc<dyn crate::state::sync::Sink>) {
        self.sync.attach(sink);
    }

    fn shard_of(&self, subject: &Subject<'_>) -> usize {
        (self.hasher.hash_one(subject as &dyn SubjectView) % SHARDS as u64) as usize
    }

    fn read(&self, i: usize) -> RwLockReadGuard<'_, Shard> {
        crate::lock::read(&self.shards[i])
    }

    fn write(&self, i: usize) -> RwLockWriteGuard<'_, Shard> {
        crate::lock::write(&self.shards[i])
    }

    /// Cool `key` of `channel` for `wait`, at most `max`, from `now`. A later deadline already
    /// set is kept (a shorter hint never shortens a cool-down). Returns the deadline in force,
    /// or `None` when the bounded wait is zero.
    pub fn cool(
        &self,
        channel: &str,
        key: &str,
        wait: Duration,
        max: Duration,
        now: Instant,
    ) -> Option<Instant> {
        let wait = wait.min(max);
        if wait.is_zero() {
            return None;
        }
        let until = now.checked_add(wait)?;
        let (cooled_until, longer) = self.set(channel, key, until, now);
        if longer {
            self.sync.emit(|| crate::state::sync::Change::KeyCooled {
                channel: channel.to_string(),
                key: key.to_string(),
                wait: cooled_until.saturating_duration_since(now),
            });
        }
        Some(cooled_until)
    }

    /// A cool-down another replica learned: `key` of `channel` held back until `until`.
    pub fn apply(&self, channel: &str, key: &str, until: Instant, now: Instant) {
        self.set(channel, key, until, now);
    }

    /// Keep the later of the deadline in force and `until`; returns the deadline and
    /// whether `until` extended it.
    fn set(&self, channel: &str, key: &str, until: Instant, now: Instant) -> (Instant, bool) {
        let subject = Subject::Key { channel, key };
        let shard_index = self.shard_of(&subject);
        let mut shard = self.write(shard_index);
        if let Some(d) = shard.get_mut(&subject as &dyn SubjectView) {
            let longer = until > *d;
            *d = (*d).max(until);
            return (*d, longer);
        }
        let before = shard.len();
        if shard.len() >= self.per_shard {
            shard.retain(|_, d| *d > now);
            if shard.len() >= self.per_shard {
                let soonest = shard
                    .iter()
                    .min_by_key(|(_, d)| **d)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    shard.remove(&k);
                }
            }
        }
        shard.insert(subject.to_owned_key(), until);
        self.adjust(before, shard.len());
        (until, true)
    }

    /// Keys cooling at `now` with their deadlines (to announce them again).
    pub fn cooling(&self, now: Instant) -> Vec<(String, String, Instant)> {
        let mut out = Vec::new();
        for i in 0..SHARDS {
            for (k, d) in self.read(i).iter().filter(|(_, d)| **d > now) {
                let (_, channel, key) = k.view();
                out.push((channel.to_string(), key.to_string(), *d));
            }
        }
        out
    }

    /// Until when `key` of `channel` is cooling, if it is at `now`.
    pub fn cooling_until(&self, channel: &str, key: &str, now: Instant) -> Option<Instant> {
        let subject = Subject::Key { channel, key };
        let until = *self
            .read(self.shard_of(&subject))
            .get(&subject as &dyn SubjectView)?;
        (until > now).then_some(until)
    }

    /// End a key's cool-down (an operator re-enabled it, or the key was removed).
    pub fn clear(&self, channel: &str, key: &str) {
        let subject = Subject::Key { channel, key };
        let mut shard = self.write(self.shard_of(&subject));
        if shard.remove(&subject as &dyn SubjectView).is_some() {
            self.entries.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Keep the entry count in step with a shard that went from `before` to `after`.
    fn adjust(&self, before: usize, after: usize) {
        if after >= before {
            self.entries.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.entries.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// False when no key has cooled since the last sweep: one atomic load, so a request
    /// pays no lookup while nothing cools.
    pub fn any(&self) -> bool {
        self.entries.load(Ordering::Relaxed) > 0
    }

    /// Drop expired entries; returns how many.
    pub fn sweep(&self, now: Instant) -> usize {
        let mut removed = 0;
        for i in 0..SHARDS {
            let mut shard = self.write(i);
            let before = shard.len();
            shard.retain(|_, d| *d > now);
            removed += before - shard.len();
            self.adjust(before, shard.len());
        }
        removed
    }

    /// Entries held (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.read(i).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
