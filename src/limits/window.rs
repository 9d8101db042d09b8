//! The sliding-window counter behind `rpm`, `rpd` and `tpm` (R15.1): a ring of granule
//! counters, counted conservatively so no span of the window's length ever holds more than
//! the limit (see the module docs of `limits` for why this and not GCRA).
//!
//! Time is milliseconds since the store's epoch. Granule `s` covers `[s·g, (s+1)·g)`. At
//! time `t` (granule `c`) the live granules are `c − slots ..= c`: `slots + 1` of them, the
//! oldest only partly inside `(t − window, t]` but counted whole. So a unit counted at
//! granule `s` leaves the window at `(s + slots + 1)·g` — at most one granule late, never
//! early.

/// A window's shape: `slots` granules of `granule_ms` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub granule_ms: u64,
    pub slots: u64,
}

/// One minute in one-second granules (`rpm`, `tpm`).
pub const MINUTE: Geometry = Geometry {
    granule_ms: 1_000,
    slots: 60,
};

/// One day in five-minute granules (`rpd`).
pub const DAY: Geometry = Geometry {
    granule_ms: 300_000,
    slots: 288,
};

impl Geometry {
    /// The window's length in milliseconds.
    pub fn span_ms(&self) -> u64 {
        self.granule_ms * self.slots
    }

    fn granule(&self, now_ms: u64) -> u64 {
        now_ms / self.granule_ms
    }

    /// When a unit counted in granule `s` stops being counted.
    fn leaves_at(&self, s: u64) -> u64 {
        s.saturating_add(self.slots + 1)
            .saturating_mul(self.granule_ms)
    }
}

/// One window's counters. Allocated once per subject and kind; every operation after that is
/// allocation-free and O(1) amortised (O(slots) only for a refusal's wait).
#[derive(Debug, Clone)]
pub struct Window {
    geo: Geometry,
    /// `slots + 1` counters; granule `s` lives at `ring[s % len]`.
    ring: Box<[u32]>,
    /// The newest granule the ring holds.
    head: u64,
    /// The sum of `ring`.
    total: u64,
}

impl Window {
    pub fn new(geo: Geometry) -> Self {
        let geo = Geometry {
            granule_ms: geo.granule_ms.max(1),
            slots: geo.slots.max(1),
        };
        Window {
            geo,
            ring: vec![0; (geo.slots + 1) as usize].into_boxed_slice(),
            head: 0,
            total: 0,
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    fn idx(&self, s: u64) -> usize {
        (s % self.ring.len() as u64) as usize
    }

    /// The oldest granule still live at `now_ms` that the ring holds.
    fn first_live(&self, now_ms: u64) -> u64 {
        let granule = self.geo.granule(now_ms).max(self.head);
        granule
            .saturating_sub(self.geo.slots)
            .max(self.head.saturating_sub(self.geo.slots))
    }

    /// Move the ring to `now_ms`, zeroing granules that left the window.
    pub fn advance(&mut self, now_ms: u64) {
        let granule = self.geo.granule(now_ms);
        if granule <= self.head {
            return;
        }
        if granule - self.head > self.geo.slots {
            self.ring.fill(0);
            self.total = 0;
        } else {
            for s in self.head + 1..=granule {
                let slot = self.idx(s);
                self.total -= u64::from(self.ring[slot]);
                self.ring[slot] = 0;
            }
        }
        self.head = granule;
    }

    /// Units counted at `now_ms` (read-only: granules that would leave are not counted).
    pub fn used(&self, now_ms: u64) -> u64 {
        let granule = self.geo.granule(now_ms);
        if granule <= self.head {
            return self.total;
        }
        if granule - self.head > self.geo.slots {
            return 0;
        }
        let leaving: u64 = (self.head + 1..=granule)
            .map(|s| u64::from(self.ring[self.idx(s)]))
            .sum();
        self.total - leaving
    }

    /// Count `cost` in the current granule (call [`Window::advance`] first); returns that
    /// granule so the cost can be given back later. Saturates rather than wraps.
    pub fn add(&mut self, cost: u64) -> u64 {
        let slot = self.idx(self.head);
        let add = cost.min(u64::from(u32::MAX - self.ring[slot]));
        self.ring[slot] += add as u32;
        self.total += add;
        self.head
    }

    /// Give back up to `amount` counted in granule `s` (call [`Window::advance`] first).
    /// A granule that already left the window has nothing left to give back.
    pub fn give_back(&mut self, s: u64, amount: u64) {
        if s > self.head || s + self.geo.slots < self.head {
            return;
        }
        let slot = self.idx(s);
        let take = amount.min(u64::from(self.ring[slot]));
        self.ring[slot] -= take as u32;
        self.total -= take;
    }

    /// How long until `cost` more fits under `limit`: `Some(0)` now, `None` never (the cost
    /// alone exceeds the limit). Read-only.
    pub fn wait_ms(&self, cost: u64, limit: u64, now_ms: u64) -> Option<u64> {
        if cost > limit {
            return None;
        }
        let used = self.used(now_ms);
        if used.saturating_add(cost) <= limit {
            return Some(0);
        }
        let mut left = used;
        for s in self.first_live(now_ms)..=self.head {
            left -= u64::from(self.ring[self.idx(s)]).min(left);
            if left + cost <= limit {
                return Some(self.geo.leaves_at(s).saturating_sub(now_ms));
            }
        }
        // Unreachable while `total` is the ring's sum; a whole window is always enough.
        Some(self.geo.leaves_at(self.head).saturating_sub(now_ms))
    }

    /// How long until nothing is counted any more (the SDK headers' "reset"). Read-only.
    pub fn reset_ms(&self, now_ms: u64) -> u64 {
        let first = self.first_live(now_ms);
        (first..=self.head)
            .rev()
            .find(|&s| self.ring[self.idx(s)] > 0)
            .map_or(0, |s| self.geo.leaves_at(s).saturating_sub(now_ms))
    }
}
