//! The pre-commit throughput guard (`timeouts.min_tokens_per_second`): a stream whose first
//! tokens come slower than the floor fails over like a first-byte timeout, before anything
//! reached the client.
//!
//! With the floor on, the commit point moves: the first content event starts a window, and
//! the stream commits once `need` more content events (each counted as one token: providers
//! send one or a few per event, so the guard errs on the side of keeping a stream) arrived
//! within `need / floor` seconds — or at its terminal event. `need` is the floor rounded up
//! (at least 1), so the window is one to two seconds for a floor of 1 or more. A stream that
//! does not make it by then is an ordinary failed attempt (nothing was relayed yet). The
//! cost: the client's first token waits for the window's tokens (at a fast upstream, the
//! time it takes to produce them).

use std::time::Duration;

use tokio::time::Instant;

use crate::wire::dialect::StreamFormat;

/// One stream's window (see the module doc); `Floor::off()` commits at the first content.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    /// Tokens per second; 0 = off.
    rate: f64,
    need: u32,
    got: u32,
    /// The window's end, once the first content event started it.
    until: Option<Instant>,
}

impl Floor {
    /// The guard at `rate` tokens per second for a stream of `format` (off for 0, and for
    /// a format whose content events the gateway cannot tell).
    pub fn new(rate: f64, format: StreamFormat) -> Floor {
        let on = rate.is_finite() && rate > 0.0 && format != StreamFormat::Other;
        let rate = if on { rate } else { 0.0 };
        Floor {
            rate,
            need: (rate.ceil() as u32).max(1),
            got: 0,
            until: None,
        }
    }

    /// Off: commit at the first content event.
    pub fn off() -> Floor {
        Floor::new(0.0, StreamFormat::Other)
    }

    /// A content-bearing (or terminal) event arrived at `now`: may the stream commit?
    pub fn commits(&mut self, terminal: bool, now: Instant) -> bool {
        if self.rate == 0.0 || terminal {
            return true;
        }
        match self.until {
            None => {
                let secs = f64::from(self.need) / self.rate;
                self.until = Some(now + Duration::from_secs_f64(secs.min(3600.0)));
                false
            }
            Some(_) => {
                self.got += 1;
                self.got >= self.need
            }
        }
    }

    /// The read gate: `gate`, or the window's end when that comes first.
    pub fn gate(&self, gate: Instant) -> Instant {
        self.until.map_or(gate, |u| u.min(gate))
    }

    /// The window is open and ends at `at`: a read that timed out there is too slow.
    pub fn ends_at(&self, at: Instant) -> bool {
        self.until.is_some_and(|u| u <= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_commits_at_once_and_a_terminal_event_always_commits() {
        let now = Instant::now();
        assert!(Floor::off().commits(false, now));
        assert!(Floor::new(0.0, StreamFormat::Chat).commits(false, now));
        assert!(Floor::new(5.0, StreamFormat::Other).commits(false, now));
        let mut f = Floor::new(5.0, StreamFormat::Chat);
        assert!(!f.commits(false, now));
        assert!(f.commits(true, now));
    }

    #[test]
    fn the_window_needs_the_floor_rounded_up_within_its_time() {
        let now = Instant::now();
        let mut f = Floor::new(2.5, StreamFormat::Messages);
        assert_eq!(
            f.gate(now + Duration::from_secs(30)),
            now + Duration::from_secs(30)
        );
        assert!(!f.commits(false, now));
        // 3 tokens within 3 / 2.5 = 1.2 s.
        let end = now + Duration::from_millis(1200);
        assert_eq!(f.gate(now + Duration::from_secs(30)), end);
        assert_eq!(
            f.gate(now + Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert!(f.ends_at(end) && !f.ends_at(now));
        assert!(!f.commits(false, now));
        assert!(!f.commits(false, now));
        assert!(f.commits(false, now));
        let mut slow = Floor::new(0.5, StreamFormat::Chat);
        assert!(!slow.commits(false, now));
        assert_eq!(
            slow.gate(now + Duration::from_secs(30)),
            now + Duration::from_secs(2)
        );
        assert!(slow.commits(false, now));
    }
}
