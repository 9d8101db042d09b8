//! What a limit check answers besides "yes": the kinds of limit, the numbers the SDK headers
//! carry (limit, remaining, reset), and a refusal with its reason and `retry_after` (R15.2).

use std::fmt;
use std::time::Duration;

/// A kind of limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Rpm,
    Rpd,
    Tpm,
    Concurrency,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Rpm, Kind::Rpd, Kind::Tpm, Kind::Concurrency];

    /// The config and metric label: `rpm`, `rpd`, `tpm`, `concurrency`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Rpm => "rpm",
            Kind::Rpd => "rpd",
            Kind::Tpm => "tpm",
            Kind::Concurrency => "concurrency",
        }
    }

    /// The window the kind counts over (`None`: concurrency has none).
    pub fn window(self) -> Option<Duration> {
        match self {
            Kind::Rpm | Kind::Tpm => Some(Duration::from_secs(60)),
            Kind::Rpd => Some(Duration::from_secs(86_400)),
            Kind::Concurrency => None,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One limit's state as the SDK headers show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Numbers {
    pub limit: u64,
    /// What is left now (before the refused request; after an admitted one).
    pub remaining: u64,
    /// Until nothing is counted any more ("fully replenished"); zero for concurrency.
    pub reset: Duration,
}

/// The numbers of every configured kind (`None` = unlimited). Packed (a limit of 0 marks an
/// unlimited kind, resets in milliseconds) so a `Refusal` stays small enough to return by
/// value on the refused path without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    limit: [u64; 4],
    remaining: [u64; 4],
    reset_ms: [u32; 4],
}

impl Report {
    pub fn get(&self, kind: Kind) -> Option<Numbers> {
        let i = kind.index();
        (self.limit[i] > 0).then(|| Numbers {
            limit: self.limit[i],
            remaining: self.remaining[i],
            reset: Duration::from_millis(u64::from(self.reset_ms[i])),
        })
    }

    /// Record `kind`'s numbers (`None` or a limit of 0: unlimited). Resets beyond ~49 days
    /// are stored as that (no window is longer than a day).
    pub fn set(&mut self, kind: Kind, numbers: Option<Numbers>) {
        let i = kind.index();
        let numbers = numbers.unwrap_or_default();
        self.limit[i] = numbers.limit;
        self.remaining[i] = numbers.remaining;
        self.reset_ms[i] = u32::try_from(numbers.reset.as_millis()).unwrap_or(u32::MAX);
    }

    /// The request limit the SDK headers show: `prefer` when it is a request kind that is
    /// configured (the refused one), else whichever of `rpm`/`rpd` has less remaining.
    pub fn requests(&self, prefer: Option<Kind>) -> Option<Numbers> {
        if let Some(k @ (Kind::Rpm | Kind::Rpd)) = prefer {
            if let Some(n) = self.get(k) {
                return Some(n);
            }
        }
        match (self.get(Kind::Rpm), self.get(Kind::Rpd)) {
            (Some(m), Some(d)) if d.remaining < m.remaining => Some(d),
            (Some(m), _) => Some(m),
            (None, d) => d,
        }
    }

    /// The fraction of the tightest configured limit still free, in `[0, 1]`; 1 when
    /// unlimited (weights for `routing.balance: capacity`).
    pub fn remaining_fraction(&self) -> f64 {
        Kind::ALL
            .iter()
            .filter_map(|&k| self.get(k))
            .map(|n| (n.remaining as f64 / n.limit as f64).clamp(0.0, 1.0))
            .fold(1.0, f64::min)
    }
}

/// Whether a subject has room for a request (non-mutating answer for planning).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Room {
    Now,
    /// Not before this long.
    After(Duration),
    /// The request alone exceeds a limit.
    Never,
}

/// A refused request: which limit, when to come back, and the numbers for the headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub kind: Kind,
    /// `None`: the request can never fit (its reservation alone exceeds the limit).
    pub retry_after: Option<Duration>,
    /// What the request asked of `kind`: 1 request, or its token reservation.
    pub needed: u64,
    pub report: Report,
}

impl Refusal {
    pub fn can_never_fit(&self) -> bool {
        self.retry_after.is_none()
    }

    /// The refused limit's numbers.
    pub fn numbers(&self) -> Option<Numbers> {
        self.report.get(self.kind)
    }
}

/// Whole seconds, rounded up, at least 1.
pub fn ceil_secs(duration: Duration) -> u64 {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    secs.max(1)
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = self.numbers().map_or(0, |n| n.limit);
        let Some(wait) = self.retry_after else {
            return write!(
                f,
                "this request reserves {} tokens (prompt estimate + max_tokens) but the limit is \
                 {limit} tokens per minute, so it can never be admitted; lower max_tokens or \
                 shorten the prompt",
                self.needed
            );
        };
        let secs = ceil_secs(wait);
        match self.kind {
            Kind::Rpm => write!(f, "rate limit reached: {limit} requests per minute"),
            Kind::Rpd => write!(f, "rate limit reached: {limit} requests per day"),
            Kind::Tpm => write!(
                f,
                "token rate limit reached: {limit} tokens per minute, {} left, this request \
                 reserves {}",
                self.numbers().map_or(0, |n| n.remaining),
                self.needed
            ),
            Kind::Concurrency => {
                write!(f, "concurrency limit reached: {limit} requests in flight")
            }
        }?;
        write!(f, "; retry after {secs}s")
    }
}
