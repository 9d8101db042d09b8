//! The single-process store (R15, default): one cell per subject in a sharded, bounded map.
//! No global lock — a shard's read lock for the lookup, then the cell's own mutex for one
//! transition. Synchronous and allocation-free once a subject's cell exists.

use std::future::{ready, Future};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::time::Instant;

use super::cell::{CellState, Taken};
use super::refusal::{Refusal, Report};
use super::store::{Ask, Grant, Peek, Store};
use super::subject::{OwnedSubject, Subject, SubjectView};
use crate::fastmap::FastMap;

/// How much state a `Local` store may keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Subjects (clients and upstream keys) tracked at most; a cell is ≤ 1.7 KB.
    pub max_subjects: usize,
    /// Map shards (contention spreads across them).
    pub shards: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            max_subjects: 32_768,
            shards: 32,
        }
    }
}

/// A subject's cell, shared by the map and by the admissions it granted.
#[derive(Debug, Default)]
pub struct Cell {
    state: Mutex<CellState>,
}

impl Cell {
    /// The cell's state. A poisoned lock only means a panic mid-update of plain counters.
    pub fn lock(&self) -> MutexGuard<'_, CellState> {
        crate::lock::lock(&self.state)
    }
}

type Shard = FastMap<OwnedSubject, Arc<Cell>>;

/// Local limit state.
#[derive(Debug)]
pub struct Local {
    epoch: Instant,
    shards: Box<[RwLock<Shard>]>,
    per_shard: usize,
    hasher: foldhash::fast::RandomState,
}

impl Default for Local {
    fn default() -> Self {
        Local::new(Bounds::default())
    }
}

/// Milliseconds from `epoch` to `now` (0 before it).
fn ms_since(epoch: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(epoch).as_millis()).unwrap_or(u64::MAX)
}

impl Local {
    /// An empty store whose clock starts now.
    pub fn new(bounds: Bounds) -> Self {
        let shard_count = bounds.shards.max(1);
        Local {
            epoch: Instant::now(),
            shards: (0..shard_count)
                .map(|_| RwLock::new(FastMap::default()))
                .collect(),
            per_shard: bounds.max_subjects.div_ceil(shard_count).max(1),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn ms(&self, now: Instant) -> u64 {
        ms_since(self.epoch, now)
    }

    fn shard_of(&self, subject: &Subject<'_>) -> usize {
        (self.hasher.hash_one(subject as &dyn SubjectView) % self.shards.len() as u64) as usize
    }

    fn read(&self, i: usize) -> RwLockReadGuard<'_, Shard> {
        crate::lock::read(&self.shards[i])
    }

    fn write(&self, i: usize) -> RwLockWriteGuard<'_, Shard> {
        crate::lock::write(&self.shards[i])
    }

    /// The subject's cell, if it has one.
    pub fn existing(&self, subject: Subject<'_>) -> Option<Arc<Cell>> {
        self.read(self.shard_of(&subject))
            .get(&subject as &dyn SubjectView)
            .cloned()
    }

    /// The subject's cell, created on first use (the only allocation of the path).
    fn cell(&self, subject: Subject<'_>, now_ms: u64) -> Arc<Cell> {
        let shard_index = self.shard_of(&subject);
        if let Some(c) = self.read(shard_index).get(&subject as &dyn SubjectView) {
            return c.clone();
        }
        let mut shard = self.write(shard_index);
        if let Some(c) = shard.get(&subject as &dyn SubjectView) {
            return c.clone();
        }
        if shard.len() >= self.per_shard {
            make_room(&mut shard, self.per_shard, now_ms);
        }
        let cell = Arc::new(Cell::default());
        shard.insert(subject.to_owned_key(), cell.clone());
        cell
    }

    /// Subjects tracked now.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|i| self.read(i).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The synchronous admission (what the `Store` future wraps).
    pub fn admit_now(
        &self,
        subject: Subject<'_>,
        ask: &Ask,
        now: Instant,
    ) -> Result<LocalGrant, Refusal> {
        let now_ms = self.ms(now);
        let cell = self.cell(subject, now_ms);
        let (taken, report) = {
            let mut st = cell.lock();
            let taken = st.admit(ask, now_ms)?;
            (taken, st.report(ask, now_ms))
        };
        Ok(LocalGrant {
            cell: Some(cell),
            taken,
            report,
            epoch: self.epoch,
        })
    }
}

/// Unheld cells that count nothing any more cannot matter.
fn evictable(cell: &Arc<Cell>, now_ms: u64) -> bool {
    Arc::strong_count(cell) == 1 && cell.lock().is_idle(now_ms)
}

/// A full shard: drop idle cells; if none, the least recently used unheld one (its counts
/// are lost — the price of the bound, reached only with far more subjects than configured).
fn make_room(shard: &mut Shard, cap: usize, now_ms: u64) {
    shard.retain(|_, c| !evictable(c, now_ms));
    if shard.len() < cap {
        return;
    }
    let lru = shard
        .iter()
        .filter(|(_, c)| Arc::strong_count(c) == 1)
        .min_by_key(|(_, c)| c.lock().last_ms())
        .map(|(k, _)| k.clone());
    if let Some(k) = lru {
        shard.remove(&k);
    }
}

impl Store for Local {
    type Grant = LocalGrant;

    fn admit(
        &self,
        subject: Subject<'_>,
        ask: &Ask,
        now: Instant,
    ) -> impl Future<Output = Result<LocalGrant, Refusal>> + Send {
        ready(self.admit_now(subject, ask, now))
    }

    fn peek(&self, subject: Subject<'_>, ask: &Ask, now: Instant) -> Peek {
        let now_ms = self.ms(now);
        match self.existing(subject) {
            Some(c) => {
                let st = c.lock();
                Peek {
                    room: st.room(ask, now_ms),
                    report: st.report(ask, now_ms),
                }
            }
            None => {
                let st = CellState::default();
                Peek {
                    room: st.room(ask, now_ms),
                    report: st.report(ask, now_ms),
                }
            }
        }
    }

    fn sweep(&self, now: Instant) -> usize {
        let now_ms = self.ms(now);
        let mut removed = 0;
        for i in 0..self.shards.len() {
            let mut shard = self.write(i);
            let before = shard.len();
            shard.retain(|_, c| !evictable(c, now_ms));
            removed += before - shard.len();
        }
        removed
    }
}

/// A local admission's hold on its cell. Drop releases the permit (and keeps the token
/// reservation as the charge); `settle` / `cancel` reconcile first.
#[derive(Debug)]
pub struct LocalGrant {
    cell: Option<Arc<Cell>>,
    taken: Taken,
    report: Report,
    epoch: Instant,
}

impl Grant for LocalGrant {
    fn report(&self) -> &Report {
        &self.report
    }

    fn settle(mut self, actual_tokens: u64, now: Instant) {
        if let Some(c) = self.cell.take() {
            c.lock()
                .settle(&self.taken, actual_tokens, ms_since(self.epoch, now));
        }
    }

    fn cancel(mut self, now: Instant) {
        if let Some(c) = self.cell.take() {
            c.lock().cancel(&self.taken, ms_since(self.epoch, now));
        }
    }
}

impl Drop for LocalGrant {
    fn drop(&mut self) {
        if let Some(c) = self.cell.take() {
            c.lock().release();
        }
    }
}
