//! Client connections spread over the serving threads: a thread that accepts a connection
//! while it serves at least two more than the least busy thread hands the connection to
//! that thread. All threads accept from one socket, and a burst of new connections is
//! taken by whichever thread is awake — often all of it by one, which then serves them on
//! one core for their whole keep-alive lives while the other cores idle (seen: 64
//! connections, all on one of two threads, in one `make bench` run of three).
//!
//! A connection counts against the thread that serves it from the moment it is chosen (a
//! [`Serving`] guard, carried with a handed connection), so a burst is dealt out evenly
//! before any thread has run; the guard releases the count when the connection ends, or
//! when a handed connection is dropped unserved.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::telemetry;

/// A thread whose inbox is closed (it stopped, or never started) counts as this busy.
const CLOSED: usize = usize::MAX / 4;

/// A connection on its way to the thread that will serve it.
pub struct Handed {
    pub stream: std::net::TcpStream,
    pub peer: SocketAddr,
    pub accepted: Instant,
    /// Counted against the receiving thread already.
    pub serving: Serving,
}

/// The serving threads' open connections and inboxes.
pub struct Spread {
    live: Box<[AtomicUsize]>,
    inboxes: Box<[mpsc::UnboundedSender<Handed>]>,
    gauges: Box<[metrics::Gauge]>,
}

impl Spread {
    /// A spread over `threads` threads, and each thread's inbox.
    pub fn new(threads: usize) -> (Arc<Spread>, Vec<mpsc::UnboundedReceiver<Handed>>) {
        let (inboxes, receivers): (Vec<_>, Vec<_>) =
            (0..threads).map(|_| mpsc::unbounded_channel()).unzip();
        let gauges = (1..=threads)
            .map(|n| metrics::gauge!(telemetry::SERVING_THREAD_CONNECTIONS, "thread" => n.to_string()))
            .collect();
        let spread = Spread {
            live: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            inboxes: inboxes.into(),
            gauges,
        };
        (Arc::new(spread), receivers)
    }

    /// Thread `me` cannot take connections (it did not start): none is dealt to it.
    pub fn close(&self, me: usize) {
        if let Some(live) = self.live.get(me) {
            live.store(CLOSED, Ordering::Relaxed);
        }
    }

    /// The thread to serve a connection that thread `me` accepted: `me`, unless another
    /// serves at least two fewer (then the least busy, the first of equals).
    pub fn pick(&self, me: usize) -> usize {
        let count = |i: usize| {
            self.live
                .get(i)
                .map_or(CLOSED, |l| l.load(Ordering::Relaxed))
        };
        let least = (0..self.live.len()).min_by_key(|&i| count(i)).unwrap_or(me);
        if count(least).saturating_add(2) <= count(me) {
            least
        } else {
            me
        }
    }

    /// Thread `thread` serves one more connection until the guard drops.
    pub fn serving(self: &Arc<Self>, thread: usize) -> Serving {
        if let Some(live) = self.live.get(thread) {
            live.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(g) = self.gauges.get(thread) {
            g.increment(1.0);
        }
        Serving {
            spread: self.clone(),
            thread,
        }
    }

    /// Send `handed` to its thread's inbox; back when that thread no longer takes any (and
    /// it is then dealt none).
    pub fn hand(&self, handed: Handed) -> Result<(), Box<Handed>> {
        let thread = handed.serving.thread;
        let Some(inbox) = self.inboxes.get(thread) else {
            return Err(Box::new(handed));
        };
        inbox.send(handed).map_err(|mpsc::error::SendError(h)| {
            self.close(thread);
            Box::new(h)
        })
    }
}

/// One connection counted against its serving thread; the count drops with the guard.
pub struct Serving {
    spread: Arc<Spread>,
    thread: usize,
}

impl Serving {
    /// The thread this connection is counted against.
    pub fn thread(&self) -> usize {
        self.thread
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(live) = self.spread.live.get(self.thread) {
            // A closed thread's count stays where `close` put it.
            let _ = live.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < CLOSED).then(|| n.saturating_sub(1))
            });
        }
        if let Some(g) = self.spread.gauges.get(self.thread) {
            g.decrement(1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst accepted by one thread is dealt out evenly as it arrives, before any other
    /// thread has run: the counts are taken when a connection is dealt, not when served.
    #[test]
    fn a_burst_accepted_by_one_thread_is_dealt_evenly() {
        let (spread, _inboxes) = Spread::new(3);
        let mut held = Vec::new();
        for _ in 0..30 {
            let to = spread.pick(0);
            held.push(spread.serving(to));
        }
        let mut per = [0; 3];
        for s in &held {
            per[s.thread()] += 1;
        }
        assert!(per.iter().all(|&n| (9..=11).contains(&n)), "{per:?}");
    }

    /// A thread keeps what it accepts while no other serves two fewer; ended connections
    /// free their count, and a thread's own burst then stays with it.
    #[test]
    fn a_thread_keeps_its_connections_until_another_serves_two_fewer() {
        let (spread, _inboxes) = Spread::new(2);
        let a = spread.serving(0);
        assert_eq!(spread.pick(0), 0, "1 against 0");
        let b = spread.serving(0);
        assert_eq!(spread.pick(0), 1, "2 against 0");
        assert_eq!(spread.pick(1), 1, "the less busy keeps its own");
        drop((a, b));
        assert_eq!(spread.pick(0), 0, "both free again");
    }

    /// A connection to `peer` on its way to `thread`, counted there.
    fn handed(spread: &Arc<Spread>, peer: SocketAddr, thread: usize) -> Handed {
        Handed {
            stream: std::net::TcpStream::connect(peer).unwrap(),
            peer,
            accepted: Instant::now(),
            serving: spread.serving(thread),
        }
    }

    /// A thread whose inbox is gone is dealt nothing, and a connection handed to it comes
    /// back to be served where it was accepted.
    #[tokio::test]
    async fn a_thread_that_takes_no_connections_is_dealt_none() {
        let (spread, mut inboxes) = Spread::new(2);
        drop(inboxes.pop()); // thread 1's receiver
        let _mine = spread.serving(0);
        let _more = spread.serving(0);
        assert_eq!(spread.pick(0), 1, "not known to be gone yet");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = listener.local_addr().unwrap();
        let back = spread
            .hand(handed(&spread, peer, 1))
            .expect_err("thread 1 takes none");
        drop(back);
        assert_eq!(spread.pick(0), 0, "thread 1 is closed");
        // Thread 0's own inbox still delivers.
        assert!(spread.hand(handed(&spread, peer, 0)).is_ok());
        let got = inboxes[0].recv().await.expect("delivered");
        assert_eq!(got.serving.thread(), 0);
    }
}
