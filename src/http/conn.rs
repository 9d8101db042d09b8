//! One client connection's lifetime (R14.2: silent connections cannot hold slots):
//! the first request head must arrive within `limits.header_read_timeout` of the accept —
//! on HTTP/1 and HTTP/2 alike, including a connection that sends nothing or only (part of)
//! the HTTP/2 preface — and a connection with nothing in flight for `limits.idle_timeout` is
//! closed gracefully (HTTP/2: GOAWAY). Per-address connection counts live here too.
//!
//! A request is in flight from the moment its head is parsed until its response body has
//! been sent or dropped: [`Tracked`] wraps each response body and marks the end on drop.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::{sleep_until, Instant};

use crate::lock::lock;

/// What a connection is doing, shared by its service and its watchdog.
#[derive(Default)]
struct Inner {
    /// A request head has arrived on this connection.
    served: AtomicBool,
    in_flight: AtomicUsize,
    /// When the connection last became idle (nothing in flight).
    idle_since: Mutex<Option<Instant>>,
    /// Notified once, when the first request head arrives.
    changed: Notify,
}

/// The activity of one connection.
#[derive(Clone, Default)]
pub struct Activity(Arc<Inner>);

/// Why the watchdog ends a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// No request head within the header read timeout: close at once.
    FirstHead,
    /// Nothing in flight for the idle timeout: shut down gracefully.
    Idle,
}

impl Activity {
    /// A request head arrived: it is in flight until the returned guard drops.
    pub fn begin(&self) -> InFlight {
        self.0.in_flight.fetch_add(1, Ordering::AcqRel);
        if !self.0.served.swap(true, Ordering::AcqRel) {
            // The first head: the watchdog leaves the header deadline for the idle one.
            self.0.changed.notify_waiters();
        }
        InFlight(self.0.clone())
    }

    /// Resolves when the connection should end; never while a request is in flight.
    ///
    /// Only the first request head wakes the watchdog (it ends the header deadline). After
    /// that it is lazy: a request's start or end wakes nothing — the watchdog shares the
    /// connection's task, so each wake-up also polled hyper's dispatcher, two spurious
    /// polls and a timer re-arm per request. It sleeps to the earliest moment
    /// the connection could expire and looks again there, every `idle` while a request is
    /// in flight.
    pub async fn expired(&self, accepted: Instant, header: Duration, idle: Duration) -> Expired {
        loop {
            let first_head = self.0.changed.notified();
            if self.0.served.load(Ordering::Acquire) {
                break;
            }
            tokio::select! {
                _ = sleep_until(accepted + header) => {
                    if !self.0.served.load(Ordering::Acquire) {
                        return Expired::FirstHead;
                    }
                }
                _ = first_head => {}
            }
        }
        let mut at = Instant::now() + idle;
        loop {
            sleep_until(at).await;
            if self.0.in_flight.load(Ordering::Acquire) > 0 {
                at = Instant::now() + idle;
                continue;
            }
            let since = lock(&self.0.idle_since).unwrap_or(accepted);
            at = since + idle;
            // A request may have begun since the check above: it keeps the connection.
            if at <= Instant::now() && self.0.in_flight.load(Ordering::Acquire) == 0 {
                return Expired::Idle;
            }
            at = at.max(Instant::now() + Duration::from_millis(1));
        }
    }
}

/// One request in flight; dropping it (with the response body) marks its end.
pub struct InFlight(Arc<Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *lock(&self.0.idle_since) = Some(Instant::now());
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request in flight until it is done or dropped.
    pub struct Tracked<B> {
        #[pin]
        body: B,
        guard: Option<InFlight>,
    }
}

impl<B> Tracked<B> {
    pub fn new(body: B, guard: InFlight) -> Self {
        Tracked {
            body,
            guard: Some(guard),
        }
    }
}

impl<B: Body<Data = Bytes>> Body for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let poll = this.body.poll_frame(cx);
        if let Poll::Ready(None) | Poll::Ready(Some(Err(_))) = poll {
            this.guard.take();
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Open connections per client address (`limits.max_connections_per_ip`).
#[derive(Clone, Default)]
pub struct PerIp(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One connection counted against its address; dropping it uncounts it.
pub struct IpSlot {
    map: PerIp,
    ip: IpAddr,
}

impl PerIp {
    /// Count a connection from `ip`, unless `max` (0 = no cap) are already open.
    pub fn acquire(&self, ip: IpAddr, max: usize) -> Option<IpSlot> {
        let mut counts = lock(&self.0);
        let n = counts.entry(ip).or_insert(0);
        if max > 0 && *n >= max {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            map: self.clone(),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut counts = lock(&self.map.0);
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head that arrives early ends the (longer) header deadline at once: the idle
    /// timeout counts from the end of the request, not from the header deadline; many
    /// requests in a row keep the connection, however long they take together.
    #[tokio::test(start_paused = true)]
    async fn an_early_head_switches_to_the_idle_deadline() {
        let activity = Activity::default();
        let t0 = Instant::now();
        let (header, idle) = (Duration::from_secs(10), Duration::from_millis(500));
        let a2 = activity.clone();
        let waiter = tokio::spawn(async move { a2.expired(t0, header, idle).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        for _ in 0..20 {
            let guard = activity.begin();
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(guard);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!waiter.is_finished(), "closed between requests");
        let last = Instant::now() - Duration::from_millis(100);
        assert_eq!(waiter.await.unwrap(), Expired::Idle);
        assert_eq!(last.elapsed(), idle);
        assert!(t0.elapsed() < header + idle);
    }

    #[tokio::test(start_paused = true)]
    async fn first_head_then_idle() {
        let activity = Activity::default();
        let t0 = Instant::now();
        let head = Duration::from_secs(1);
        let idle = Duration::from_secs(10);
        assert_eq!(activity.expired(t0, head, idle).await, Expired::FirstHead);
        assert_eq!(t0.elapsed(), head);
        let guard = activity.begin();
        // In flight: never expires; after the guard drops, idle counts from then.
        let a2 = activity.clone();
        let waiter = tokio::spawn(async move { a2.expired(t0, head, idle).await });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!waiter.is_finished());
        let ended = Instant::now();
        drop(guard);
        assert_eq!(waiter.await.unwrap(), Expired::Idle);
        assert_eq!(ended.elapsed(), idle);
    }

    #[test]
    fn per_ip_caps_and_releases() {
        let per_ip = PerIp::default();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let first = per_ip.acquire(ip, 2).unwrap();
        let _b = per_ip.acquire(ip, 2).unwrap();
        assert!(per_ip.acquire(ip, 2).is_none());
        assert!(per_ip.acquire("10.0.0.1".parse().unwrap(), 2).is_some());
        drop(first);
        assert!(per_ip.acquire(ip, 2).is_some());
        assert!(per_ip.acquire(ip, 0).is_some(), "0 = no cap");
    }
}
