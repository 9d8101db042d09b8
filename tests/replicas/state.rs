//! The shared-state runtime in process (R17.1, R17.2): two or three "replicas"
//! (each its own registry, bindings, store and budget) on one private Redis. Covers what the
//! end-to-end test does not reach through HTTP: route cooldowns, "model not found" marks,
//! upstream key cooldowns, the retry budget, and bindings read back by a replica that joins
//! later or after Redis restarted empty, and a subscription frozen half-open (through a proxy).

use std::sync::Arc;
use std::time::Duration;

use crate::support::external::Redis;
use switchyard::affinity::{Bindings, StickyKey, StickyKind};
use switchyard::limits::KeyCooldowns;
use switchyard::routing::budget::RetryBudget;
use switchyard::routing::family::PathFamily;
use switchyard::routing::outcome::{Outcome, OutcomeFacts};
use switchyard::shared::{Shared, Wiring};
use switchyard::state::outcome::{record_attempt, record_visit, Target};
use switchyard::state::{Registry, Snapshot};
use tokio::sync::watch;
use tokio::time::Instant;

const YAML: &str = "channels:\n  a:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n    keys: [k1, k2]\n    models: [m]\n    resilience:\n      cooldown: {consecutive_retryable_failures: 1, duration: 600s}\n  b:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n    keys: [k3]\n    models: [m]\nclients:\n  alice: {key: sk-a}\n";

struct Node {
    snap: Arc<Snapshot>,
    bindings: Arc<Bindings>,
    budget: Arc<RetryBudget>,
    kc: Arc<KeyCooldowns>,
    store: switchyard::store::Store,
    shared: Shared,
    _registry: Arc<Registry>,
    _dir: tempfile::TempDir,
}

fn node(redis: &Redis, stop: &watch::Receiver<bool>) -> Node {
    node_with(redis, stop, YAML)
}

fn node_with(redis: &Redis, stop: &watch::Receiver<bool>, yaml: &str) -> Node {
    node_on(&redis.url(), stop, yaml, Duration::from_millis(300))
}

/// A node on the Redis at `url` (maybe through a proxy), resyncing every `resync`.
fn node_on(url: &str, stop: &watch::Receiver<bool>, yaml: &str, resync: Duration) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    let cfg = switchyard::config::load_text(yaml, &path).unwrap();
    let registry = Arc::new(Registry::default());
    let table = switchyard::routing::compile::compile(Arc::new(cfg), 1);
    let snap = Arc::new(Snapshot::new(table, &registry));
    let store = switchyard::store::Store::open(dir.path().join("s.db").to_str().unwrap()).unwrap();
    let bindings = Arc::new(Bindings::default());
    let budget = Arc::new(RetryBudget::new(0.0, 1, Duration::from_secs(10)));
    let (s, b) = (snap.clone(), budget.clone());
    let wiring = Wiring {
        snapshot: Arc::new(move || s.clone()),
        bindings: bindings.clone(),
        store: store.clone(),
        budget: Arc::new(move || b.clone()),
        replicas: 2,
        resync,
    };
    let (shared, _task) = Shared::start(url, wiring, &registry, stop.clone()).unwrap();
    let kc = Arc::new(KeyCooldowns::default());
    shared.attach_key_cooldowns(kc.clone());
    Node {
        snap,
        bindings,
        budget,
        kc,
        store,
        shared,
        _registry: registry,
        _dir: dir,
    }
}

async fn until(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if check() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

async fn up(node: &Node) {
    until(Duration::from_secs(3), || node.shared.is_up())
        .await
        .expect("runtime joined Redis");
}

fn status(code: u16, message: &str) -> OutcomeFacts {
    let outcome = Outcome::Status {
        code,
        error_code: None,
        error_type: None,
        message: message.into(),
    };
    OutcomeFacts::of(&outcome, &Default::default(), PathFamily::Chat)
}

/// A route cooldown, a "model not found" mark and an upstream key cooldown made on one
/// replica hold on the other within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldowns_marks_and_key_cooldowns_reach_the_other_replica() {
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, n2) = (node(&redis, &stop), node(&redis, &stop));
    up(&n1).await;
    up(&n2).await;
    let (ch, st) = (&n1.snap.table.channels[0], &n1.snap.states[0]);
    assert_eq!(ch.name, "a");
    record_visit(
        ch,
        st,
        "m",
        &status(503, "overloaded"),
        Duration::ZERO,
        false,
    );
    let fps = n1.snap.key_fps[0].clone();
    let target = Target {
        ch,
        st,
        fps: &fps,
        key: 0,
        model: "m",
    };
    let rules = n1.snap.table.config.auto_disable.clone();
    record_attempt(
        &n1.store,
        &rules,
        &target,
        &status(404, "The model `m` does not exist"),
    );
    n1.kc.cool(
        "a",
        "fp-1",
        Duration::from_secs(30),
        Duration::from_secs(60),
        Instant::now(),
    );

    let (ch2, st2) = (&n2.snap.table.channels[0], &n2.snap.states[0]);
    let seen = until(Duration::from_secs(1), || {
        st2.cooldown
            .is_cooled_down(&ch2.resilience.cooldown, Instant::now())
            && st2.missing_models.is_missing("m", Instant::now())
            && n2.kc.cooling_until("a", "fp-1", Instant::now()).is_some()
    })
    .await
    .expect("all three held on the other replica within a second");
    eprintln!("cooldown, mark and key cooldown seen after {seen:?}");
    let left = st2
        .cooldown
        .remaining(&ch2.resilience.cooldown, Instant::now())
        .unwrap();
    assert!(
        left > Duration::from_secs(598),
        "{left:?}: the time left, not a fresh start"
    );
    assert!(
        !n2.snap.states[1]
            .missing_models
            .is_missing("m", Instant::now()),
        "b untouched"
    );
}

/// R4.9 + R17.1: the retry budget is counted across replicas — retries taken on one
/// replica come off the other's budget after the next exchange (about a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_is_shared_approximately() {
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, n2) = (node(&redis, &stop), node(&redis, &stop));
    up(&n1).await;
    up(&n2).await;
    // Floor 1/s × 10 s = 10 retries for the whole deployment.
    let mut took = 0;
    while n1.budget.try_acquire_retry() {
        took += 1;
    }
    assert_eq!(
        took, 10,
        "the floor, shared (not divided) while Redis answers"
    );
    let seen = until(Duration::from_secs(4), || n2.budget.others() == (0, 10))
        .await
        .expect("the other replica's budget counts the retries taken on the first");
    eprintln!("budget exchange seen after {seen:?}");
    assert!(
        !n2.budget.try_acquire_retry(),
        "the deployment's budget is spent"
    );
    assert_eq!(
        n1.budget.others(),
        (0, 0),
        "a replica's own counts are not doubled"
    );
}

fn key(hash: u128) -> StickyKey {
    StickyKey {
        kind: StickyKind::Session,
        hash,
        ttl: Duration::from_secs(3600),
        skip_retry: false,
    }
}

/// Bindings live in Redis with their TTL: a replica that joins later reads them; after
/// Redis restarts empty, the replicas push theirs again and a newcomer still finds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_survive_a_late_joiner_and_an_empty_restart() {
    let mut redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let n1 = node(&redis, &stop);
    up(&n1).await;
    for h in 1..=50u128 {
        n1.bindings
            .bind(&key(h), if h % 2 == 0 { "a" } else { "b" });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n2 = node(&redis, &stop);
    until(Duration::from_secs(3), || n2.bindings.len() == 50)
        .await
        .expect("a late joiner reads every binding");
    let binding = n2.bindings.get(7).unwrap();
    assert_eq!(&*binding.channel, "b");
    assert!(
        binding.expires > Instant::now() + Duration::from_secs(3500),
        "with its TTL"
    );

    redis.restart();
    until(Duration::from_secs(5), || {
        n1.shared.is_up() && n2.shared.is_up()
    })
    .await
    .expect("both back");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n3 = node(&redis, &stop);
    until(Duration::from_secs(3), || n3.bindings.len() == 50)
        .await
        .expect("pushed again after the empty restart");
}

/// R7.1 + R17.1: an auto-disable on one replica (a 401 on key 0 of a two-key channel)
/// holds on the other within a second, by key fingerprint; its lifting (as a probe
/// re-enable does: `enable_key` + `save`) too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_disable_and_its_lifting_reach_the_other_replica() {
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, n2) = (node(&redis, &stop), node(&redis, &stop));
    up(&n1).await;
    up(&n2).await;
    let (ch, st) = (&n1.snap.table.channels[0], &n1.snap.states[0]);
    let fps = n1.snap.key_fps[0].clone();
    let target = Target {
        ch,
        st,
        fps: &fps,
        key: 0,
        model: "m",
    };
    let rules = n1.snap.table.config.auto_disable.clone();
    record_attempt(&n1.store, &rules, &target, &status(401, "invalid api key"));
    assert!(st.key_disabled(&fps[0]));
    let st2 = &n2.snap.states[0];
    let seen = until(Duration::from_secs(1), || st2.key_disabled(&fps[0]))
        .await
        .expect("the auto-disabled key is disabled on the other replica");
    eprintln!("auto-disable seen after {seen:?}");
    assert!(
        !st2.key_disabled(&fps[1]) && !st2.is_disabled(),
        "only that key"
    );
    let why = st2.key_disabled_why(&fps[0]).unwrap();
    assert!(why.auto && why.reason.contains("401"), "{why:?}");
    st.enable_key(&fps[0]);
    st.save(
        &n1.store,
        switchyard::store::StateKey::Key(fps[0].hex()),
        None,
    );
    until(Duration::from_secs(1), || !st2.key_disabled(&fps[0]))
        .await
        .expect("the lifting reaches the other replica");
}

/// R17.1: replicas on different config generations — here the other replica lists the
/// channel's keys in the other order and has a third channel — name the same key by its
/// fingerprint, so the disabled key is the same key there, not the same position.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_generation_disables_the_same_key_not_the_same_position() {
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let other = YAML
        .replace("keys: [k1, k2]", "keys: [k2, k1]")
        .replace("clients:", "  c:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n    keys: [k4]\n    models: [m]\nclients:");
    let (n1, n2) = (node(&redis, &stop), node_with(&redis, &stop, &other));
    up(&n1).await;
    up(&n2).await;
    assert_eq!(n2.snap.table.channels.len(), 3);
    let (ch, st) = (&n1.snap.table.channels[0], &n1.snap.states[0]);
    let fps = n1.snap.key_fps[0].clone();
    let target = Target {
        ch,
        st,
        fps: &fps,
        key: 0,
        model: "m",
    };
    let rules = n1.snap.table.config.auto_disable.clone();
    record_attempt(&n1.store, &rules, &target, &status(401, "invalid api key"));
    let (st2, fps2) = (&n2.snap.states[0], n2.snap.key_fps[0].clone());
    assert_eq!(fps2[1], fps[0], "k1 is the second key there");
    until(Duration::from_secs(1), || st2.key_disabled(&fps2[1]))
        .await
        .expect("k1 disabled on the other generation");
    assert!(
        !st2.key_disabled(&fps2[0]),
        "k2, at k1's old position, stays enabled"
    );
}

/// The periodic resync repairs a change that never left its replica (here: a disable set
/// without being announced, as when the outbox was full).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_change_is_repaired_by_the_resync() {
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, n2) = (node(&redis, &stop), node(&redis, &stop));
    up(&n1).await;
    up(&n2).await;
    let disabled = switchyard::state::channel::Disabled {
        reason: "lost on its way".into(),
        at_ms: switchyard::store::now_ms(),
        auto: false,
    };
    n1.snap.states[1].set_disabled(Some(disabled));
    let st2 = &n2.snap.states[1];
    let waited = until(Duration::from_secs(2), || st2.is_disabled())
        .await
        .expect("repaired by the next resync");
    eprintln!("repaired after {waited:?} (resync every 300 ms here)");
}

/// A TCP proxy to Redis that can freeze the subscriptions open at a moment: their bytes stop
/// in both directions while the sockets stay open (a silent partition, a half-open
/// connection). Connections made later pass.
struct Freezer {
    url: String,
    /// Connections with an id up to this one are frozen (once subscribed).
    frozen_upto: Arc<std::sync::atomic::AtomicU64>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl Freezer {
    async fn start(redis: &Redis) -> Freezer {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}/0", listener.local_addr().unwrap());
        let target = format!("127.0.0.1:{}", redis.port);
        let frozen_upto = Arc::new(AtomicU64::new(0));
        let next = Arc::new(AtomicU64::new(1));
        let (f, ids) = (frozen_upto.clone(), next.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let id = ids.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                    continue;
                };
                let subscriber = Arc::new(AtomicBool::new(false));
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let stuck = {
                    let (f, sub) = (f.clone(), subscriber.clone());
                    move || sub.load(Ordering::SeqCst) && f.load(Ordering::SeqCst) >= id
                };
                let (up_stuck, sub) = (stuck.clone(), subscriber.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16384];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        if buf[..n]
                            .windows(9)
                            .any(|w| w.eq_ignore_ascii_case(b"SUBSCRIBE"))
                        {
                            sub.store(true, Ordering::SeqCst);
                        }
                        while up_stuck() {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        if sw.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16384];
                    while let Ok(n) = sr.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        while stuck() {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        if cw.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Freezer {
            url,
            frozen_upto,
            next,
        }
    }

    /// Freeze every subscription open now.
    fn freeze(&self) {
        use std::sync::atomic::Ordering;
        let last = self.next.load(Ordering::SeqCst) - 1;
        self.frozen_upto.store(last, Ordering::SeqCst);
    }
}

/// B-bounded-resources: a subscription that goes silent without closing (its connection
/// frozen) is noticed by its ping and made again, so another replica's change arrives
/// within seconds — not at the next full resync (60 s here). Before the fix the frozen
/// subscription was never noticed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_open_subscription_is_noticed_and_made_again() {
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let proxy = Freezer::start(&redis).await;
    let n1 = node_on(&proxy.url, &stop, YAML, Duration::from_secs(60));
    let n2 = node_on(&redis.url(), &stop, YAML, Duration::from_secs(60));
    up(&n1).await;
    up(&n2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Connections opened from now on pass: only the open subscription is stuck.
    proxy.freeze();
    tokio::time::sleep(Duration::from_millis(200)).await;
    n2.kc.cool(
        "a",
        "fp-9",
        Duration::from_secs(30),
        Duration::from_secs(60),
        Instant::now(),
    );
    let seen = until(Duration::from_secs(5), || {
        n1.kc.cooling_until("a", "fp-9", Instant::now()).is_some()
    })
    .await;
    assert!(
        seen.is_some(),
        "the change reached the replica with the frozen subscription"
    );
    eprintln!("seen after {seen:?}");
}

/// B-shared-versions (clock skew): a replica whose clock runs an hour ahead disables channel
/// `a` (it writes what such a replica writes: a change stamped with its own clock); an
/// operator then enables `a` on the other replica. The enable wins on both and in Redis —
/// versions come from Redis, not from the replicas' clocks. Before the fix the enable was
/// lost in Redis and the replicas diverged (one served, the other kept `a` disabled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enable_wins_over_a_disable_from_a_fast_clock() {
    use switchyard::state::channel::Disabled;
    use switchyard::store::StateKey;
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, n2) = (node(&redis, &stop), node(&redis, &stop));
    up(&n1).await;
    up(&n2).await;
    let (st1, st2) = (&n1.snap.states[0], &n2.snap.states[0]);
    let fast = Disabled {
        reason: "operator (fast clock)".into(),
        at_ms: switchyard::store::now_ms() + 3_600_000,
        auto: false,
    };
    st2.set_disabled(Some(fast.clone()));
    st2.save(&n2.store, StateKey::Channel, Some(&fast));
    until(Duration::from_secs(2), || st1.is_disabled())
        .await
        .expect("the disable reached the other replica");
    // The operator's enable on the replica with the right clock.
    st1.set_disabled(None);
    st1.save(&n1.store, StateKey::Channel, None);
    until(Duration::from_secs(2), || !st2.is_disabled())
        .await
        .expect("the enable reached the fast replica");
    // Both stay enabled through a resync (every 300 ms here): Redis holds the enable too.
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(
        !st1.is_disabled() && !st2.is_disabled(),
        "the replicas agree"
    );
}

/// Two nodes (their own stop channels) whose channel `a` breaker — threshold 1, `timeout` —
/// was opened on the first and is open on both, and that breaker's limits.
async fn open_on_two(
    redis: &Redis,
    timeout: &str,
    stops: [&watch::Receiver<bool>; 2],
) -> (Node, Node, switchyard::state::breaker::Limits) {
    use switchyard::state::breaker::{Admission, Limits};
    let yaml = YAML.replace(
        "      cooldown: {consecutive_retryable_failures: 1, duration: 600s}\n",
        &format!("      circuit_breaker: {{failure_threshold: 1, timeout: {timeout}}}\n"),
    );
    let n1 = node_on(&redis.url(), stops[0], &yaml, Duration::from_secs(60));
    let n2 = node_on(&redis.url(), stops[1], &yaml, Duration::from_secs(60));
    up(&n1).await;
    up(&n2).await;
    let ch = n1.snap.table.channels[0].clone();
    let lim = Limits::of(&ch.resilience.circuit_breaker);
    let st1 = &n1.snap.states[0];
    record_visit(
        &ch,
        st1,
        "m",
        &status(503, "overloaded"),
        Duration::ZERO,
        false,
    );
    let st2 = &n2.snap.states[0];
    until(Duration::from_secs(1), || {
        st2.breakers.acquire(&lim, None, Instant::now()).0 == Admission::Refused
    })
    .await
    .expect("open on both");
    (n1, n2, lim)
}

/// B-shared-probe-lease: a replica that took the half-open probe lease and then died frees the
/// probe slot within about a second (the lease is 1 s, renewed only by a live holder), not
/// after the breaker's whole timeout (3 s here): the other replica probes promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_probe_holder_frees_the_slot_within_a_second() {
    use switchyard::state::breaker::Admission;
    let redis = Redis::start();
    let (kill1, stop1) = watch::channel(false);
    let (_tx, stop2) = watch::channel(false);
    let (n1, n2, lim) = open_on_two(&redis, "3s", [&stop1, &stop2]).await;
    let (st1, st2) = (&n1.snap.states[0], &n2.snap.states[0]);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    until(Duration::from_secs(2), || {
        st1.breakers.acquire(&lim, None, Instant::now()).0 == Admission::Probe
    })
    .await
    .expect("replica 1 takes the probe");
    // Replica 1 dies with its probe in flight: nobody renews its lease.
    kill1.send(true).unwrap();
    let died = std::time::Instant::now();
    let took = until(Duration::from_secs(3), || {
        st2.breakers.acquire(&lim, None, Instant::now()).0 == Admission::Probe
    })
    .await
    .expect("replica 2 probes");
    let since = died.elapsed();
    assert!(
        since < Duration::from_millis(1800),
        "slot freed after {since:?}"
    );
    eprintln!("replica 2 probed {took:?} after replica 1 died");
}

/// B-shared-probe-lease: a replica that got the probe lease but sends no probe (no traffic of
/// its own) does not keep it: the lease lapses within a second and the replica with
/// traffic probes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_lease_holder_does_not_keep_the_probe() {
    use switchyard::state::breaker::Admission;
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, n2, lim) = open_on_two(&redis, "1s", [&stop, &stop]).await;
    let (st1, st2) = (&n1.snap.states[0], &n2.snap.states[0]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Replica 1 asks (a plan-time check) and is granted the lease, then gets no traffic.
    until(Duration::from_secs(2), || {
        st1.breakers.would_admit(&lim, None, Instant::now())
    })
    .await
    .expect("replica 1 holds the lease");
    let started = std::time::Instant::now();
    until(Duration::from_secs(4), || {
        st2.breakers.acquire(&lim, None, Instant::now()).0 == Admission::Probe
    })
    .await
    .expect("replica 2, with traffic, probes");
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
}

/// B-shared-probe-lease: the first request after the breaker's timeout on a replica with
/// traffic is the probe — its runtime asked for the lease before the timeout ended —
/// instead of failing over while the lease is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_request_after_the_timeout_is_the_probe() {
    use switchyard::state::breaker::Admission;
    let redis = Redis::start();
    let (_tx, stop) = watch::channel(false);
    let (n1, _n2, lim) = open_on_two(&redis, "1s", [&stop, &stop]).await;
    // Opened a few milliseconds ago: its timeout ends just before t0 + 1 s.
    let t0 = std::time::Instant::now();
    let st1 = &n1.snap.states[0];
    // Traffic while open: refused (failing over).
    while t0.elapsed() < Duration::from_millis(850) {
        assert_eq!(
            st1.breakers.acquire(&lim, None, Instant::now()).0,
            Admission::Refused
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1080).saturating_sub(t0.elapsed())).await;
    assert_eq!(
        st1.breakers.acquire(&lim, None, Instant::now()).0,
        Admission::Probe,
        "the first request after the timeout probes"
    );
}
