//! Paused-time tests of the shared-state seams (R17.1): what a breaker, a binding store and
//! key cooldowns announce, when they ask for the probe lease, and how another replica's
//! change (with its time left) is applied. No Redis: a recording sink stands in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{advance, Instant};

use crate::affinity::{Bindings, StickyKey, StickyKind};
use crate::limits::KeyCooldowns;
use crate::state::breaker::set::{Breakers, LEASE_ASK_EVERY, PROBE_LEASE};
use crate::state::breaker::{Admission, Limits, State, Verdict};
use crate::state::sync::{Change, Sink};

#[derive(Default)]
struct Rec {
    changes: Mutex<Vec<Change>>,
    down: AtomicBool,
}

impl Sink for Rec {
    fn emit(&self, change: Change) {
        self.changes.lock().unwrap().push(change);
    }
    fn is_live(&self) -> bool {
        !self.down.load(Ordering::Relaxed)
    }
}

impl Rec {
    fn take(&self) -> Vec<Change> {
        std::mem::take(&mut self.changes.lock().unwrap())
    }
}

fn lim() -> Limits {
    Limits {
        failure_threshold: 2,
        success_threshold: 1,
        timeout: Duration::from_secs(30),
    }
}

fn shared_breakers() -> (Breakers, Arc<Rec>) {
    let breakers = Breakers::default();
    let rec = Arc::new(Rec::default());
    breakers.share("ch", rec.clone());
    (breakers, rec)
}

fn open(b: &Breakers) {
    for _ in 0..2 {
        b.record(&lim(), None, Verdict::Failure, false, Instant::now());
    }
}

/// An opening is announced with its timeout; past the timeout the breaker refuses until
/// it holds the probe lease, asking at most every LEASE_ASK_EVERY; with the lease one probe
/// runs; its success closes the breaker and is announced.
#[tokio::test(start_paused = true)]
async fn the_half_open_probe_needs_the_lease() {
    let (b, rec) = shared_breakers();
    open(&b);
    let opened = Change::BreakerOpened {
        channel: "ch".into(),
        scope: None,
        timeout: Duration::from_secs(30),
    };
    assert_eq!(rec.take(), vec![failed(None), opened]);
    advance(Duration::from_secs(30)).await;
    let now = Instant::now();
    assert!(!b.would_admit(&lim(), None, now), "no lease: no probe");
    assert_eq!(b.acquire(&lim(), None, now).0, Admission::Refused);
    let asks = rec.take();
    assert_eq!(asks.len(), 1, "asked once: {asks:?}");
    assert!(matches!(&asks[0], Change::ProbeWanted { ttl, .. } if *ttl == PROBE_LEASE));
    advance(LEASE_ASK_EVERY).await;
    assert!(!b.would_admit(&lim(), None, Instant::now()));
    assert_eq!(rec.take().len(), 1, "asks again after LEASE_ASK_EVERY");
    b.deny_lease(None, Instant::now() + Duration::from_secs(5));
    advance(Duration::from_secs(4)).await;
    assert!(!b.would_admit(&lim(), None, Instant::now()));
    assert!(
        rec.take().is_empty(),
        "denied: not before the holder's lease ends"
    );
    b.grant_lease(None, Instant::now() + PROBE_LEASE);
    assert!(
        b.leases_held(&lim(), Instant::now()).is_empty(),
        "not renewed before its probe is out"
    );
    assert!(b.would_admit(&lim(), None, Instant::now()));
    assert_eq!(b.acquire(&lim(), None, Instant::now()).0, Admission::Probe);
    assert_eq!(
        b.leases_held(&lim(), Instant::now()),
        vec![None],
        "renewed while its probe is out"
    );
    assert_eq!(
        b.acquire(&lim(), None, Instant::now()).0,
        Admission::Refused,
        "one probe at a time"
    );
    let (_, state) = b.record(&lim(), None, Verdict::Success, true, Instant::now());
    assert_eq!(state, State::Closed);
    assert_eq!(
        rec.take(),
        vec![Change::BreakerClosed {
            channel: "ch".into(),
            scope: None
        }]
    );
    assert!(b.would_admit(&lim(), None, Instant::now()));
}

fn failed(scope: Option<&str>) -> Change {
    Change::BreakerFailed {
        channel: "ch".into(),
        scope: scope.map(str::to_string),
        threshold: 2,
        timeout: Duration::from_secs(30),
    }
}

/// B-shared-failure-counts: a closed breaker's failure is announced for the deployment's
/// count, and so is the success that ends a run of failures (not one without failures
/// before it); the deployment's count is applied (the larger one kept, 0 resets) and a count
/// at the threshold opens the breaker here without announcing it again. While Redis is
/// away nothing is announced and the local count opens the breaker as without shared state.
#[tokio::test(start_paused = true)]
async fn failures_are_counted_by_the_deployment() {
    let (b, rec) = shared_breakers();
    let now = Instant::now();
    b.record(&lim(), Some("m"), Verdict::Success, false, now);
    assert!(rec.take().is_empty(), "a success with no failures: nothing");
    b.acquire(&lim(), Some("m"), now);
    b.record(&lim(), Some("m"), Verdict::Failure, false, now);
    assert_eq!(rec.take(), vec![failed(Some("m"))]);
    b.record(&lim(), Some("m"), Verdict::Success, false, now);
    assert_eq!(
        rec.take(),
        vec![Change::BreakerSucceeded {
            channel: "ch".into(),
            scope: Some("m".into())
        }]
    );
    b.record(&lim(), None, Verdict::Neutral, false, now);
    assert!(rec.take().is_empty());

    assert!(
        !b.apply_failures(&lim(), None, 1, now),
        "below the threshold"
    );
    assert_eq!(b.provider().consecutive_failures(), 1);
    assert!(!b.apply_failures(&lim(), None, 0, now));
    assert_eq!(
        b.provider().consecutive_failures(),
        0,
        "a success elsewhere"
    );
    assert!(
        b.apply_failures(&lim(), None, 2, now),
        "the fleet's count opens it"
    );
    assert_eq!(b.provider().state(&lim(), now), State::Open);
    assert!(rec.take().is_empty(), "applied, not announced again");
    assert!(!b.apply_failures(&lim(), None, 5, now), "already open");

    let (b, rec) = shared_breakers();
    rec.down.store(true, Ordering::Relaxed);
    b.record(&lim(), None, Verdict::Failure, false, now);
    assert!(rec.take().is_empty(), "Redis away: counted locally only");
    b.record(&lim(), None, Verdict::Failure, false, now);
    assert_eq!(b.provider().state(&lim(), now), State::Open);
}

/// While Redis is unreachable the replica probes on its own (no lease to ask for).
#[tokio::test(start_paused = true)]
async fn without_redis_the_probe_is_local() {
    let (b, rec) = shared_breakers();
    open(&b);
    rec.down.store(true, Ordering::Relaxed);
    advance(Duration::from_secs(30)).await;
    assert_eq!(b.acquire(&lim(), None, Instant::now()).0, Admission::Probe);
}

/// Another replica's opening applies with its time left; a lease granted before it is
/// dropped; another replica's close closes.
#[tokio::test(start_paused = true)]
async fn remote_open_and_close_apply_with_the_time_left() {
    let (b, rec) = shared_breakers();
    b.apply_open(&lim(), Some("m1"), Duration::from_secs(10), Instant::now());
    assert!(
        rec.take().is_empty(),
        "applied changes are not announced again"
    );
    assert!(!b.would_admit(&lim(), Some("m1"), Instant::now()));
    assert!(
        b.would_admit(&lim(), Some("m2"), Instant::now()),
        "other models unaffected"
    );
    advance(Duration::from_millis(9_999)).await;
    assert_eq!(
        b.acquire(&lim(), Some("m1"), Instant::now()).0,
        Admission::Refused
    );
    assert!(rec.take().is_empty(), "still open: nothing to ask for");
    advance(Duration::from_millis(1)).await;
    assert!(!b.would_admit(&lim(), Some("m1"), Instant::now()));
    assert_eq!(rec.take().len(), 1, "timed out: asks for the lease");
    b.apply_closed(Some("m1"));
    assert!(b.would_admit(&lim(), Some("m1"), Instant::now()));
    assert_eq!(
        b.open_now(&lim(), Instant::now()),
        vec![],
        "nothing open after the close"
    );
    b.apply_open(&lim(), None, Duration::from_secs(50), Instant::now());
    let left = b.open_now(&lim(), Instant::now());
    assert_eq!(
        left,
        vec![(None, Duration::from_secs(30))],
        "capped at the local timeout"
    );
}

fn key(hash: u128, ttl: u64) -> StickyKey {
    StickyKey {
        hash,
        kind: StickyKind::Conversation,
        ttl: Duration::from_secs(ttl),
        skip_retry: false,
    }
}

/// A new or moved binding is announced at once; a refresh only once it extends the shared
/// expiry by more than TTL/16; another replica's binding is applied silently.
#[tokio::test(start_paused = true)]
async fn bindings_announce_new_moved_and_far_refreshed() {
    let bindings = Bindings::default();
    let rec = Arc::new(Rec::default());
    bindings.share(rec.clone());
    bindings.bind(&key(1, 1600), "a");
    assert!(
        matches!(&rec.take()[..], [Change::Bound { hash: 1, kind: "conversation", ttl, .. }] if *ttl == Duration::from_secs(1600))
    );
    advance(Duration::from_secs(100)).await;
    bindings.bind(&key(1, 1600), "a");
    assert!(
        rec.take().is_empty(),
        "a refresh within TTL/16 (100 s) is not announced"
    );
    advance(Duration::from_secs(1)).await;
    bindings.bind(&key(1, 1600), "a");
    assert_eq!(rec.take().len(), 1, "past TTL/16: announced");
    bindings.bind(&key(1, 1600), "b");
    assert_eq!(rec.take().len(), 1, "moved: announced at once");
    bindings.apply(
        2,
        StickyKind::Session,
        "c",
        Instant::now() + Duration::from_secs(1600),
    );
    assert!(rec.take().is_empty());
    assert_eq!(
        bindings.get(2).map(|x| x.channel.to_string()),
        Some("c".to_string())
    );
    bindings.bind(&key(2, 1600), "c");
    assert!(
        rec.take().is_empty(),
        "the other replica's expiry is already as far"
    );
    advance(Duration::from_secs(1600)).await;
    assert_eq!(bindings.get(2), None, "expires with its TTL");
}

/// A key cooldown is announced when it starts or lengthens, not when a shorter hint comes;
/// another replica's is applied silently.
#[tokio::test(start_paused = true)]
async fn key_cooldowns_announce_longer_deadlines_only() {
    let kc = KeyCooldowns::default();
    let rec = Arc::new(Rec::default());
    kc.share(rec.clone());
    let max = Duration::from_secs(60);
    let now = Instant::now();
    kc.cool("ch", "fp", Duration::from_secs(10), max, now);
    assert!(
        matches!(&rec.take()[..], [Change::KeyCooled { wait, .. }] if *wait == Duration::from_secs(10))
    );
    kc.cool("ch", "fp", Duration::from_secs(5), max, now);
    assert!(rec.take().is_empty(), "a shorter hint changes nothing");
    kc.apply("ch", "fp2", now + Duration::from_secs(20), now);
    assert!(rec.take().is_empty());
    assert_eq!(
        kc.cooling_until("ch", "fp2", now),
        Some(now + Duration::from_secs(20))
    );
    assert_eq!(kc.cooling(now).len(), 2);
}

/// R17.2: an outage is ONE error line however many callers fail during it; its end is one
/// line; the next outage is one line again. Every failure still counts (`downs`).
#[test]
fn an_outage_is_logged_once() {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    let health = super::conn::Health::default();
    tracing::subscriber::with_default(sub, || {
        for _ in 0..50 {
            health.mark_down(&"connection refused");
        }
        health.mark_up();
        health.mark_up();
        health.mark_down(&"timed out");
    });
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text.matches("Redis unreachable").count(), 2, "{text}");
    assert_eq!(text.matches("Redis reachable").count(), 1, "{text}");
    assert_eq!(health.downs(), 51);
    assert!(!health.is_up());
}
