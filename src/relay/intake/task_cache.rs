//! The task cache (R10.5): (client, task id) → the channels its task is bound to, in front of
//! the store, with the brief negative answers of B-task-negative-cache. The gateway holds one;
//! `relay::task` reads and fills it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Entries kept in memory; older bindings are read back from SQLite on demand.
pub const TASK_CACHE_CAP: usize = 10_000;

/// How long "the store holds no binding for this (client, task id)" is believed. Another
/// replica may write the binding a moment later (a poll that raced its submission), so the
/// negative answer is read again after this (B-task-negative-cache); a known binding is kept.
pub const NEGATIVE_TTL: Duration = Duration::from_secs(1);

/// Bounded (client, task id) → channels cache (oldest insert evicted first). It also
/// remembers, for [`NEGATIVE_TTL`], ids the store does not know for a client (no channels),
/// so a burst of polls of a bogus id costs one read per second; a later binding is added to
/// such an entry.
#[derive(Debug)]
pub struct TaskCache {
    inner: Mutex<Inner>,
    cap: usize,
    /// Where new bindings are announced when state is shared (R17.1).
    sync: crate::state::sync::Hook,
}

/// (client, task id).
type Key = (String, String);

/// A cached lookup: the bound channels, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    pub channels: Vec<String>,
    /// SQLite was read for this key: `channels` is every binding. False for an entry made
    /// by a new binding, which may not hold older bindings of the same id.
    pub complete: bool,
    /// When the store was read for this entry (a negative answer expires from here).
    checked: Option<Instant>,
}

impl Entry {
    /// A negative answer older than [`NEGATIVE_TTL`]: the store is asked again.
    fn expired(&self, now: Instant) -> bool {
        self.channels.is_empty()
            && self
                .checked
                .is_some_and(|t| now.saturating_duration_since(t) >= NEGATIVE_TTL)
    }
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Key, Entry>,
    order: VecDeque<Key>,
}

impl Default for TaskCache {
    fn default() -> Self {
        TaskCache::new(TASK_CACHE_CAP)
    }
}

fn key(client: &str, id: &str) -> Key {
    (client.to_string(), id.to_string())
}

impl TaskCache {
    pub fn new(cap: usize) -> Self {
        TaskCache {
            inner: Mutex::new(Inner::default()),
            cap: cap.max(1),
            sync: Default::default(),
        }
    }

    /// Announce new bindings to the other replicas through `sink` (R17.1).
    pub fn share(&self, sink: Arc<dyn crate::state::sync::Sink>) {
        self.sync.attach(sink);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::lock::lock(&self.inner)
    }

    pub fn get(&self, client: &str, id: &str) -> Option<Entry> {
        let inner = self.lock();
        let entry = inner.map.get(&key(client, id))?;
        (!entry.expired(Instant::now())).then(|| entry.clone())
    }

    /// `channel` accepted `client`'s task `id` just now: it goes first. With shared state
    /// (and Redis answering) the binding is announced to the other replicas.
    pub fn bind(&self, client: &str, id: &str, channel: &str) {
        self.put(client, id, channel, false);
        if let Some(sink) = self.sync.sink().filter(|s| s.is_live()) {
            sink.emit(crate::state::sync::Change::TaskBound {
                client: client.to_string(),
                id: id.to_string(),
                channel: channel.to_string(),
            });
        }
    }

    /// Another replica's `channel` accepted `client`'s task `id` (B-shared-task-bindings):
    /// it goes first unless this replica knows it already (not announced again). A
    /// negative answer cached for the id turns into this binding.
    pub fn apply(&self, client: &str, id: &str, channel: &str) {
        self.put(client, id, channel, true);
    }

    /// Put `channel` first in the entry of (client, id); with `known_stays`, a channel
    /// the entry holds already keeps its place.
    fn put(&self, client: &str, id: &str, channel: &str, known_stays: bool) {
        let mut inner = self.lock();
        let cache_key = key(client, id);
        match inner.map.get_mut(&cache_key) {
            Some(e) if known_stays && e.channels.iter().any(|c| c == channel) => {}
            Some(e) => {
                e.channels.retain(|c| c != channel);
                e.channels.insert(0, channel.to_string());
            }
            None => {
                let entry = Entry {
                    channels: vec![channel.to_string()],
                    complete: false,
                    checked: None,
                };
                Self::insert(&mut inner, self.cap, cache_key, entry);
            }
        }
    }

    /// Merge what SQLite holds for (client, id) behind the cached (newer) bindings; the
    /// entry is complete afterwards. Returns the merged channels.
    pub fn fill(&self, client: &str, id: &str, stored: Vec<String>) -> Vec<String> {
        let mut inner = self.lock();
        let cache_key = key(client, id);
        let mut channels = inner
            .map
            .get(&cache_key)
            .map(|e| e.channels.clone())
            .unwrap_or_default();
        for c in stored {
            if !channels.contains(&c) {
                channels.push(c);
            }
        }
        let entry = Entry {
            channels: channels.clone(),
            complete: true,
            checked: Some(Instant::now()),
        };
        match inner.map.get_mut(&cache_key) {
            Some(old) => *old = entry,
            None => Self::insert(&mut inner, self.cap, cache_key, entry),
        }
        channels
    }

    fn insert(inner: &mut Inner, cap: usize, cache_key: Key, entry: Entry) {
        inner.order.push_back(cache_key.clone());
        inner.map.insert(cache_key, entry);
        while inner.order.len() > cap {
            if let Some(old) = inner.order.pop_front() {
                inner.map.remove(&old);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
