//! Recent activity for the status page (R20.2), in bounded ring buffers: a channel's last
//! 5 minutes of attempts (rates, latency and time-to-first-byte quantiles, the last success
//! and the last error) and each client's last hour of requests and tokens.
//!
//! Memory is fixed: 30 ten-second slots per channel, 60 one-minute slots per client (clients
//! come from the config, so the map is bounded by the names configured over the process's
//! life). Quantiles come from fixed log-spaced latency buckets: the value shown is the upper
//! bound of the bucket the rank falls in.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::fastmap::FastMap;
use crate::lock::lock;

/// The channel window.
pub const SPAN: Duration = Duration::from_secs(300);
const SLOT: Duration = Duration::from_secs(10);
const SLOTS: usize = (SPAN.as_secs() / SLOT.as_secs()) as usize;

/// Upper bounds (ms) of the latency buckets; the last bucket is everything slower.
const BOUNDS_MS: [u64; 14] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000,
];
const BINS: usize = BOUNDS_MS.len() + 1;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// 1-based slot number since `base`; 0: never used.
    at: u64,
    attempts: u32,
    errors: u32,
    ttfb: [u32; BINS],
    latency: [u32; BINS],
}

/// The last error of a channel: outcome class, upstream status, when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LastError {
    pub class: &'static str,
    pub status: Option<u16>,
    pub at_ms: i64,
}

#[derive(Debug)]
struct Inner {
    slots: [Slot; SLOTS],
    last_success_ms: Option<i64>,
    last_error: Option<LastError>,
}

/// A channel's last 5 minutes (see the module doc).
#[derive(Debug)]
pub struct Recent {
    base: Instant,
    inner: Mutex<Inner>,
}

impl Default for Recent {
    fn default() -> Self {
        Recent {
            base: Instant::now(),
            inner: Mutex::new(Inner {
                slots: [Slot::default(); SLOTS],
                last_success_ms: None,
                last_error: None,
            }),
        }
    }
}

/// What the status page shows of a channel's window.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    pub window_seconds: u64,
    pub attempts: u32,
    pub errors: u32,
    /// Attempts per minute over the window.
    pub per_minute: f64,
    /// errors / attempts; 0 without attempts.
    pub error_rate: f64,
    pub ttfb_p50_ms: Option<u64>,
    pub ttfb_p95_ms: Option<u64>,
    pub latency_p50_ms: Option<u64>,
    pub latency_p95_ms: Option<u64>,
    pub last_success_ms: Option<i64>,
    pub last_error: Option<LastError>,
}

fn bin(d: Duration) -> usize {
    let ms = d.as_millis() as u64;
    BOUNDS_MS
        .iter()
        .position(|b| ms <= *b)
        .unwrap_or(BOUNDS_MS.len())
}

/// The upper bound (ms) of the bucket holding quantile `q`; None without samples. The last
/// bucket (slower than every bound) reports the highest bound.
fn quantile(h: &[u32; BINS], q: f64) -> Option<u64> {
    let total: u64 = h.iter().map(|n| u64::from(*n)).sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0u64;
    for (i, n) in h.iter().enumerate() {
        seen += u64::from(*n);
        if seen >= rank {
            return Some(BOUNDS_MS[i.min(BOUNDS_MS.len() - 1)]);
        }
    }
    BOUNDS_MS.last().copied()
}

impl Recent {
    fn slot_of(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.base).as_secs() / SLOT.as_secs() + 1
    }

    fn with_slot(&self, now: Instant, f: impl FnOnce(&mut Slot, &mut Inner)) {
        let at = self.slot_of(now);
        let mut inner = lock(&self.inner);
        let i = (at % SLOTS as u64) as usize;
        let mut slot = inner.slots[i];
        if slot.at != at {
            slot = Slot {
                at,
                ..Slot::default()
            };
        }
        f(&mut slot, &mut inner);
        inner.slots[i] = slot;
    }

    /// One attempt that reached the upstream: `error` as the health window counts it,
    /// `ttfb` its time to response headers (to the first event for a stream).
    pub fn attempt(&self, error: bool, class: &'static str, status: Option<u16>, ttfb: Duration) {
        let at_ms = crate::clock::now_ms();
        self.with_slot(crate::clock::instant(), |s, g| {
            s.attempts = s.attempts.saturating_add(1);
            s.ttfb[bin(ttfb)] = s.ttfb[bin(ttfb)].saturating_add(1);
            if error {
                s.errors = s.errors.saturating_add(1);
                g.last_error = Some(LastError {
                    class,
                    status,
                    at_ms,
                });
            } else {
                g.last_success_ms = Some(at_ms);
            }
        });
    }

    /// A request this channel answered, end to end (a stream: to its last byte).
    pub fn latency(&self, d: Duration) {
        self.with_slot(crate::clock::instant(), |s, _| {
            s.latency[bin(d)] = s.latency[bin(d)].saturating_add(1);
        });
    }

    pub fn summary(&self) -> Summary {
        let now = self.slot_of(crate::clock::instant());
        let oldest = now.saturating_sub(SLOTS as u64 - 1);
        let inner = lock(&self.inner);
        let (mut attempts, mut errors) = (0u32, 0u32);
        let (mut ttfb, mut latency) = ([0u32; BINS], [0u32; BINS]);
        for s in inner.slots.iter().filter(|s| s.at > 0 && s.at >= oldest) {
            attempts = attempts.saturating_add(s.attempts);
            errors = errors.saturating_add(s.errors);
            for i in 0..BINS {
                ttfb[i] = ttfb[i].saturating_add(s.ttfb[i]);
                latency[i] = latency[i].saturating_add(s.latency[i]);
            }
        }
        let minutes = SPAN.as_secs_f64() / 60.0;
        Summary {
            window_seconds: SPAN.as_secs(),
            attempts,
            errors,
            per_minute: f64::from(attempts) / minutes,
            error_rate: if attempts == 0 {
                0.0
            } else {
                f64::from(errors) / f64::from(attempts)
            },
            ttfb_p50_ms: quantile(&ttfb, 0.5),
            ttfb_p95_ms: quantile(&ttfb, 0.95),
            latency_p50_ms: quantile(&latency, 0.5),
            latency_p95_ms: quantile(&latency, 0.95),
            last_success_ms: inner.last_success_ms,
            last_error: inner.last_error.clone(),
        }
    }
}

const HOUR_SLOTS: usize = 60;
const MINUTE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, Default)]
struct Minute {
    at: u64,
    requests: u32,
    errors: u32,
    tokens: u64,
}

/// A client's last hour, as the status page shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Hour {
    pub requests: u32,
    /// Requests answered with a status outside 2xx.
    pub errors: u32,
    /// Input + output tokens of its answered requests.
    pub tokens: u64,
}

/// Every client's last hour, by client name (see the module doc).
#[derive(Debug)]
pub struct ClientHours {
    base: Instant,
    map: Mutex<FastMap<String, [Minute; HOUR_SLOTS]>>,
}

impl Default for ClientHours {
    fn default() -> Self {
        ClientHours {
            base: Instant::now(),
            map: Mutex::new(FastMap::default()),
        }
    }
}

impl ClientHours {
    fn minute(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.base).as_secs() / MINUTE.as_secs() + 1
    }

    /// One finished request of an authenticated client.
    pub fn record(&self, client: &str, ok: bool, tokens: u64) {
        if client.is_empty() {
            return;
        }
        let at = self.minute(crate::clock::instant());
        let mut map = lock(&self.map);
        let ring = match map.get_mut(client) {
            Some(r) => r,
            None => map
                .entry(client.to_string())
                .or_insert([Minute::default(); HOUR_SLOTS]),
        };
        let minute = &mut ring[(at % HOUR_SLOTS as u64) as usize];
        if minute.at != at {
            *minute = Minute {
                at,
                ..Minute::default()
            };
        }
        minute.requests = minute.requests.saturating_add(1);
        minute.errors = minute.errors.saturating_add(u32::from(!ok));
        minute.tokens = minute.tokens.saturating_add(tokens);
    }

    /// `client`'s last hour (zeros for a client with no request in it).
    pub fn hour(&self, client: &str) -> Hour {
        let now = self.minute(crate::clock::instant());
        let oldest = now.saturating_sub(HOUR_SLOTS as u64 - 1);
        let map = lock(&self.map);
        let Some(ring) = map.get(client) else {
            return Hour::default();
        };
        ring.iter()
            .filter(|m| m.at > 0 && m.at >= oldest)
            .fold(Hour::default(), |h, m| Hour {
                requests: h.requests.saturating_add(m.requests),
                errors: h.errors.saturating_add(m.errors),
                tokens: h.tokens.saturating_add(m.tokens),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_channel_window_counts_five_minutes_and_forgets_older_attempts() {
        let r = Recent::default();
        for _ in 0..9 {
            r.attempt(false, "ok", Some(200), Duration::from_millis(40));
        }
        r.attempt(true, "upstream_5xx", Some(500), Duration::from_millis(900));
        let s = r.summary();
        assert_eq!((s.attempts, s.errors), (10, 1));
        assert!((s.error_rate - 0.1).abs() < 1e-9, "{s:?}");
        assert!((s.per_minute - 2.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.ttfb_p50_ms, Some(50), "9 of 10 under 50 ms");
        assert_eq!(
            s.ttfb_p95_ms,
            Some(1_000),
            "the slow one is the 95th percentile"
        );
        assert_eq!(s.latency_p50_ms, None, "no answered request yet");
        let e = s.last_error.expect("last error kept");
        assert_eq!((e.class, e.status), ("upstream_5xx", Some(500)));
        assert!(s.last_success_ms.is_some());
        tokio::time::advance(Duration::from_secs(200)).await;
        r.latency(Duration::from_millis(300));
        assert_eq!(r.summary().attempts, 10);
        assert_eq!(r.summary().latency_p95_ms, Some(500));
        tokio::time::advance(Duration::from_secs(110)).await;
        let s = r.summary();
        assert_eq!(
            (s.attempts, s.errors),
            (0, 0),
            "older than 5 minutes: {s:?}"
        );
        assert_eq!(s.latency_p50_ms, Some(500), "the later latency is still in");
        assert!(s.last_error.is_some(), "the last error outlives the window");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_hour_slides_by_the_minute() {
        let c = ClientHours::default();
        c.record("alice", true, 30);
        c.record("alice", false, 0);
        c.record("", true, 5);
        assert_eq!(
            c.hour("alice"),
            Hour {
                requests: 2,
                errors: 1,
                tokens: 30
            }
        );
        assert_eq!(c.hour("bob"), Hour::default());
        tokio::time::advance(Duration::from_secs(30 * 60)).await;
        c.record("alice", true, 10);
        assert_eq!(c.hour("alice").tokens, 40);
        tokio::time::advance(Duration::from_secs(31 * 60)).await;
        assert_eq!(
            c.hour("alice"),
            Hour {
                requests: 1,
                errors: 0,
                tokens: 10
            },
            "the first minute left the hour"
        );
    }
}
