//! One subject's limit state (its windows and permits in flight) and the all-or-nothing
//! transitions on it: admit, settle, cancel, release. Plain data; the store holds the lock.

use std::time::Duration;

use super::refusal::{Kind, Numbers, Refusal, Report, Room};
use super::store::Ask;
use super::window::{Geometry, Window, DAY, MINUTE};

/// The counted kinds in `Kind` order and their windows' shapes.
const COUNTED: [(Kind, Geometry); 3] = [(Kind::Rpm, MINUTE), (Kind::Rpd, DAY), (Kind::Tpm, MINUTE)];

/// A concurrency refusal cannot know when a permit frees; clients are told to come back in 1 s.
pub const CONCURRENCY_RETRY: Duration = Duration::from_secs(1);

/// What an admission counted, so it can be reconciled or given back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Taken {
    /// The granule each counted kind was charged in (`None`: the kind was unlimited).
    granules: [Option<u64>; 3],
    /// The token reservation.
    tokens: u64,
}

/// A subject's windows (allocated when a limit of that kind is first set) and permits.
#[derive(Debug, Default)]
pub struct CellState {
    windows: [Option<Window>; 3],
    in_flight: u32,
    last_ms: u64,
}

impl CellState {
    /// Permits held now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// When the cell last admitted or was asked to.
    pub fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// Nothing counted and nothing held: dropping the cell loses nothing.
    pub fn is_idle(&self, now_ms: u64) -> bool {
        self.in_flight == 0 && self.windows.iter().flatten().all(|w| w.used(now_ms) == 0)
    }

    /// The tightest refusal for `ask` at `now_ms`, or `None` when every kind fits. Read-only.
    /// A kind that can never fit wins; otherwise the longest wait.
    fn verdict(&self, ask: &Ask, now_ms: u64) -> Option<(Kind, Option<u64>, u64)> {
        let mut worst: Option<(Kind, Option<u64>, u64)> = None;
        let mut consider = |kind, wait: Option<u64>, cost| {
            let worse = match (worst, wait) {
                (None, _) => true,
                (Some((_, None, _)), _) => false,
                (Some(_), None) => true,
                (Some((_, Some(w0), _)), Some(w)) => w > w0,
            };
            if worse {
                worst = Some((kind, wait, cost));
            }
        };
        for (i, (limit, cost)) in ask.counted().into_iter().enumerate() {
            if limit == 0 {
                continue;
            }
            let wait = match &self.windows[i] {
                Some(w) => w.wait_ms(cost, limit, now_ms),
                None => (cost <= limit).then_some(0),
            };
            if wait != Some(0) {
                consider(COUNTED[i].0, wait, cost);
            }
        }
        if ask.concurrency > 0 && self.in_flight >= ask.concurrency {
            consider(
                Kind::Concurrency,
                Some(CONCURRENCY_RETRY.as_millis() as u64),
                1,
            );
        }
        worst
    }

    /// The numbers of every configured kind at `now_ms`. Read-only.
    pub fn report(&self, ask: &Ask, now_ms: u64) -> Report {
        let mut report = Report::default();
        for (i, (limit, _)) in ask.counted().into_iter().enumerate() {
            if limit == 0 {
                continue;
            }
            let (used, reset) = self.windows[i]
                .as_ref()
                .map_or((0, 0), |w| (w.used(now_ms), w.reset_ms(now_ms)));
            let numbers = Numbers {
                limit,
                remaining: limit.saturating_sub(used),
                reset: Duration::from_millis(reset),
            };
            report.set(COUNTED[i].0, Some(numbers));
        }
        if ask.concurrency > 0 {
            let limit = u64::from(ask.concurrency);
            let numbers = Numbers {
                limit,
                remaining: limit.saturating_sub(u64::from(self.in_flight)),
                reset: Duration::ZERO,
            };
            report.set(Kind::Concurrency, Some(numbers));
        }
        report
    }

    /// Room for `ask` at `now_ms` without taking anything.
    pub fn room(&self, ask: &Ask, now_ms: u64) -> Room {
        match self.verdict(ask, now_ms) {
            None => Room::Now,
            Some((_, None, _)) => Room::Never,
            Some((_, Some(ms), _)) => Room::After(Duration::from_millis(ms)),
        }
    }

    /// All or nothing: every configured kind fits and is counted (and a permit is taken), or
    /// nothing changes and the refusal names the tightest kind.
    pub fn admit(&mut self, ask: &Ask, now_ms: u64) -> Result<Taken, Refusal> {
        self.last_ms = self.last_ms.max(now_ms);
        if let Some((kind, wait, needed)) = self.verdict(ask, now_ms) {
            return Err(Refusal {
                kind,
                retry_after: wait.map(Duration::from_millis),
                needed,
                report: self.report(ask, now_ms),
            });
        }
        let mut taken = Taken {
            tokens: ask.tokens,
            ..Taken::default()
        };
        for (i, (limit, cost)) in ask.counted().into_iter().enumerate() {
            if limit == 0 {
                continue;
            }
            let window = self.windows[i].get_or_insert_with(|| Window::new(COUNTED[i].1));
            window.advance(now_ms);
            taken.granules[i] = Some(window.add(cost));
        }
        self.in_flight = self.in_flight.saturating_add(1);
        Ok(taken)
    }

    /// The request used `actual` tokens: give back the unused reservation to the granule it
    /// was counted in, or count the overrun now. Releases the permit.
    pub fn settle(&mut self, taken: &Taken, actual: u64, now_ms: u64) {
        if let (Some(g), Some(w)) = (taken.granules[2], self.windows[2].as_mut()) {
            w.advance(now_ms);
            if actual < taken.tokens {
                w.give_back(g, taken.tokens - actual);
            } else if actual > taken.tokens {
                w.add(actual - taken.tokens);
            }
        }
        self.release();
    }

    /// The request never reached an upstream: give back everything it counted.
    pub fn cancel(&mut self, taken: &Taken, now_ms: u64) {
        let costs = [1, 1, taken.tokens];
        for (i, g) in taken.granules.iter().enumerate() {
            if let (Some(g), Some(w)) = (g, self.windows[i].as_mut()) {
                w.advance(now_ms);
                w.give_back(*g, costs[i]);
            }
        }
        self.release();
    }

    /// Give back the concurrency permit (every exit path ends here exactly once).
    pub fn release(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }
}
