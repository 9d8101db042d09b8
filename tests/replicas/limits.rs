//! Rate limits in Redis (R15.1, R17.1, R17.2): the Redis store against a private
//! `redis-server`, several limiter instances (one per "replica") sharing it, compared with
//! the local store on the same sequence, and the divided fallback while Redis is down.

use std::sync::Arc;
use std::time::Duration;

use crate::support::external::Redis;
use switchyard::limits::{ClientLimits, Kind, Limiter, Local, Room};
use switchyard::shared::conn::Conn;
use switchyard::shared::limits::RedisStore;
use tokio::time::Instant;

fn limiter(redis: &Redis, replicas: u32) -> Limiter<RedisStore> {
    let conn = Conn::open(&redis.url()).expect("url");
    Limiter::new(RedisStore::new(conn, replicas))
}

fn rpm(per_minute: u64) -> ClientLimits {
    ClientLimits {
        rpm: per_minute,
        ..Default::default()
    }
}

/// R17.1: "rpm 10 admits exactly 10 across replicas" — three limiter instances on three
/// connections, 60 concurrent admissions spread over them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpm_10_admits_exactly_10_across_three_instances() {
    let redis = Redis::start();
    let ls: Vec<Arc<Limiter<RedisStore>>> = (0..3).map(|_| Arc::new(limiter(&redis, 3))).collect();
    let mut tasks = Vec::new();
    for i in 0..60 {
        let limiter = ls[i % 3].clone();
        tasks.push(tokio::spawn(async move {
            limiter
                .admit_client("alice", &rpm(10), 0, Instant::now())
                .await
                .map(|a| {
                    let shared = a.report().get(Kind::Rpm).is_some();
                    a.settle(0, Instant::now());
                    shared
                })
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(has_numbers) => {
                assert!(has_numbers);
                admitted += 1;
            }
            Err(refusal) => {
                assert_eq!(refusal.kind, Kind::Rpm);
                let wait = refusal.retry_after.expect("a wait");
                assert!(wait <= Duration::from_secs(61), "{wait:?}");
                assert_eq!(refusal.numbers().unwrap().remaining, 0);
            }
        }
    }
    assert_eq!(admitted, 10, "exactly the limit across the three instances");
    // Another client is not affected.
    let started = ls[0].admit_client("bob", &rpm(10), 0, Instant::now()).await;
    assert!(started.is_ok());
}

/// The same sequence of admissions, settles and cancels at the same (caller) times gives
/// the same verdicts and numbers on the Redis store as on the local store: window edges
/// (a unit leaves at granule + 61 s), token reserve/reconcile, cancel.
#[tokio::test]
async fn redis_store_matches_the_local_store() {
    let redis = Redis::start();
    let conn = Conn::open(&redis.url()).unwrap();
    let remote = Limiter::new(RedisStore::new(conn, 1).with_caller_clock());
    let local = Limiter::new(Local::default());
    let t0 = Instant::now() + Duration::from_millis(500);
    let lim = ClientLimits {
        rpm: 3,
        tpm: 1000,
        ..Default::default()
    };
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    // (time, tokens, then: 0 settle with tokens/2, 1 cancel, 2 settle with 2x tokens)
    let steps: &[(f64, u64, u8)] = &[
        (0.0, 400, 0),
        (0.2, 400, 1),
        (10.0, 300, 2),
        (20.0, 100, 0),
        (30.0, 100, 0),
        (59.9, 10, 0),
        (60.5, 10, 0),
        (61.2, 10, 0),
        (70.0, 950, 0),
        (70.1, 1001, 0),
        (75.0, 50, 0),
        (131.5, 10, 0),
    ];
    let (mut admitted, mut waits, mut nevers) = (0, 0, 0);
    for (i, &(s, tokens, then)) in steps.iter().enumerate() {
        let local_grant = local.admit_client("c", &lim, tokens, at(s)).await;
        let remote_grant = remote.admit_client("c", &lim, tokens, at(s)).await;
        match (local_grant, remote_grant) {
            (Ok(a), Ok(b)) => {
                admitted += 1;
                assert_eq!(a.report(), b.report(), "step {i}: numbers");
                match then {
                    0 => {
                        a.settle(tokens / 2, at(s));
                        b.settle(tokens / 2, at(s));
                    }
                    1 => {
                        a.cancel(at(s));
                        b.cancel(at(s));
                    }
                    _ => {
                        a.settle(tokens * 2, at(s));
                        b.settle(tokens * 2, at(s));
                    }
                }
                // Settles are queued to the store's task: let it run.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a, b, "step {i}: refusal");
                if a.can_never_fit() {
                    nevers += 1;
                } else {
                    waits += 1;
                }
            }
            (a, b) => panic!("step {i}: local {:?} vs redis {:?}", a.is_ok(), b.is_ok()),
        }
    }
    // The sequence reaches every branch: admissions, refusals with a wait, "never".
    assert_eq!((admitted, waits, nevers), (7, 4, 1));
}

/// Concurrency permits are leases: released by settle or drop, and a replica that dies
/// holding one gives it back when the lease expires (30 s).
#[tokio::test]
async fn concurrency_leases_release_and_expire() {
    let redis = Redis::start();
    let conn = Conn::open(&redis.url()).unwrap();
    let limiter = Limiter::new(RedisStore::new(conn, 1).with_caller_clock());
    let lim = ClientLimits {
        concurrency: 2,
        ..Default::default()
    };
    let t0 = Instant::now();
    let first = limiter.admit_client("c", &lim, 0, t0).await.unwrap();
    let second = limiter.admit_client("c", &lim, 0, t0).await.unwrap();
    let refused = limiter.admit_client("c", &lim, 0, t0).await.unwrap_err();
    assert_eq!(refused.kind, Kind::Concurrency);
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let third = limiter
        .admit_client("c", &lim, 0, t0)
        .await
        .expect("a dropped grant released its permit");
    // A dead replica: its grants are never released.
    std::mem::forget(second);
    std::mem::forget(third);
    let later = t0 + Duration::from_secs(29);
    assert!(
        limiter.admit_client("c", &lim, 0, later).await.is_err(),
        "leases still live"
    );
    let after = t0 + Duration::from_secs(31);
    assert!(
        limiter.admit_client("c", &lim, 0, after).await.is_ok(),
        "leases expired"
    );
    assert_eq!(
        limiter.key_room("ch", "fp", &Default::default(), 0, after),
        Room::Now
    );
}

/// B-cancel-guards (cancellation harness, Redis admission): a request cancelled while its
/// admission script waits in Redis (held by `CLIENT PAUSE`) does not orphan the concurrency
/// lease the script takes once Redis runs it: the permit is free again at once, not after
/// the 30 s lease.
#[tokio::test]
async fn an_admission_cancelled_in_flight_frees_its_concurrency_lease() {
    let redis = Redis::start();
    let conn = Conn::open(&redis.url()).unwrap();
    let limiter = Limiter::new(RedisStore::new(conn, 1).with_caller_clock());
    let lim = ClientLimits {
        concurrency: 1,
        ..Default::default()
    };
    let t0 = Instant::now();
    // Loads the script, so the paused call below is the admission itself.
    drop(limiter.admit_client("c", &lim, 0, t0).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .arg("ALL")
        .query_async(&mut admin)
        .await
        .unwrap();
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        limiter.admit_client("c", &lim, 0, t0),
    )
    .await;
    assert!(cancelled.is_err(), "the admission was still in flight");
    // Redis runs the script after the pause, then the release queued by the cancellation.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let held: i64 = redis::cmd("ZCARD")
        .arg("sy:lim:{c:c}:cc")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(held, 0, "no lease is left behind");
    let again = limiter.admit_client("c", &lim, 0, t0).await;
    assert!(again.is_ok(), "the permit is free: {:?}", again.err());
}

/// B-shared-mirror-ages: an upstream key that used up its `rpm: 2` in Redis is held back while
/// the window is full and offered again once it emptied, though nothing took the key in
/// between (planning reads only the mirror). Before the fix the mirror kept "0 left, reset
/// 60 s" for good and the key never received traffic again from this replica.
#[tokio::test]
async fn a_key_held_back_by_its_limits_is_offered_again_after_the_window() {
    let redis = Redis::start();
    let conn = Conn::open(&redis.url()).unwrap();
    let limiter = Limiter::new(RedisStore::new(conn, 1).with_caller_clock());
    let lim = switchyard::limits::KeyLimits {
        rpm: 2,
        ..Default::default()
    };
    let t0 = Instant::now();
    for _ in 0..2 {
        let grant = limiter.take_key("ch", "fp", &lim, 0, t0).await.unwrap();
        grant.settle(0, t0);
    }
    assert!(
        matches!(limiter.key_room("ch", "fp", &lim, 0, t0), Room::After(_)),
        "used up: held back"
    );
    let later = t0 + Duration::from_secs(62);
    assert_eq!(
        limiter.key_room("ch", "fp", &lim, 0, later),
        Room::Now,
        "the window emptied: offered again"
    );
    assert!(
        limiter.take_key("ch", "fp", &lim, 0, later).await.is_ok(),
        "and Redis agrees"
    );
}

/// A proxy to Redis that lets the first admission script call through and then cuts the
/// connection instead of relaying its reply (the script ran; its answer was lost).
async fn cut_after_first_admission(redis: &Redis) -> String {
    use std::sync::atomic::{AtomicU8, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}/0", listener.local_addr().unwrap());
    let target = format!("127.0.0.1:{}", redis.port);
    let sha = switchyard::shared::limits::lua::ADMIT_SCRIPT
        .get_hash()
        .as_bytes()
        .to_vec();
    // 0: nothing seen, 1: the admission was forwarded, 2: its reply was cut.
    let state = Arc::new(AtomicU8::new(0));
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let (up, down) = (state.clone(), state.clone());
            let sha = sha.clone();
            let to_server = tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                    if buf[..n].windows(sha.len()).any(|w| w == &sha[..]) {
                        let _ = up.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst);
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    if down
                        .compare_exchange(1, 2, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                    {
                        to_server.abort();
                        return;
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// B-shared-pipeline: an I/O error after the admission script ran (its reply lost with the
/// connection) is retried with the same admission id: the request is counted once in Redis,
/// not twice. Before the fix the retry was a new admission and `rpm` counted 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_lost_after_the_script_ran_is_not_counted_twice() {
    use switchyard::limits::{Ask, Store, Subject};
    let redis = Redis::start();
    // Load the script first on a direct connection, so the proxied call is the admission.
    let direct = RedisStore::new(Conn::open(&redis.url()).unwrap(), 1);
    let warm = Ask {
        rpm: 100,
        ..Default::default()
    };
    drop(
        direct
            .admit(Subject::Client("warm"), &warm, Instant::now())
            .await,
    );
    let store = RedisStore::new(
        Conn::open(&cut_after_first_admission(&redis).await).unwrap(),
        1,
    );
    let ask = Ask {
        rpm: 10,
        ..Default::default()
    };
    let grant = store
        .admit(Subject::Client("once"), &ask, Instant::now())
        .await
        .expect("admitted");
    assert!(grant.is_shared(), "the retry reached Redis");
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let counts: std::collections::HashMap<String, i64> = redis::cmd("HGETALL")
        .arg("sy:lim:{c:once}:rpm")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(counts.values().sum::<i64>(), 1, "counted once: {counts:?}");
    std::mem::forget(grant);
}

/// A proxy to Redis that delays every chunk by `delay` in each direction (a distant Redis).
async fn slow_proxy(redis: &Redis, delay: Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}/0", listener.local_addr().unwrap());
    let target = format!("127.0.0.1:{}", redis.port);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            for (mut rd, mut wr) in [
                (
                    Box::new(cr) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
                    Box::new(sw) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
                ),
                (Box::new(sr) as _, Box::new(cw) as _),
            ] {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    while let Ok(n) = rd.read(&mut buf).await {
                        if n == 0 {
                            return;
                        }
                        tokio::time::sleep(delay).await;
                        if wr.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    url
}

/// B-shared-pipeline: releases are pipelined, not one round trip each. Eight workers admit
/// and release as fast as a 10 ms-away Redis allows, never holding more than eight
/// permits of sixteen: no admission may be refused for concurrency. Before the fix the
/// release queue drained one per round trip, fell behind the admissions, and refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_keep_up_with_admissions_over_a_slow_link() {
    let redis = Redis::start();
    let url = slow_proxy(&redis, Duration::from_millis(5)).await;
    let limiter = Arc::new(Limiter::new(RedisStore::new(Conn::open(&url).unwrap(), 1)));
    let lim = ClientLimits {
        concurrency: 16,
        ..Default::default()
    };
    drop(limiter.admit_client("warm", &lim, 0, Instant::now()).await);
    let mut workers = Vec::new();
    for _ in 0..8 {
        let limiter = limiter.clone();
        workers.push(tokio::spawn(async move {
            let mut refused = 0;
            for _ in 0..40 {
                match limiter.admit_client("busy", &lim, 0, Instant::now()).await {
                    Ok(a) => a.settle(0, Instant::now()),
                    Err(e) => {
                        assert_eq!(e.kind, Kind::Concurrency);
                        refused += 1;
                    }
                }
            }
            refused
        }));
    }
    let mut refused = 0;
    for w in workers {
        refused += w.await.unwrap();
    }
    assert_eq!(refused, 0, "false concurrency refusals");
}

/// R17.2: Redis unreachable — limits are divided by `shared.replicas` (9 / 3 = 3 per
/// instance), requests keep being answered, and when Redis returns the shared count
/// applies again.
#[tokio::test]
async fn redis_down_divides_limits_and_recovers() {
    let mut redis = Redis::start();
    let limiter = limiter(&redis, 3);
    assert!(limiter
        .admit_client("c", &rpm(9), 0, Instant::now())
        .await
        .is_ok());
    redis.stop();
    let mut ok = 0;
    for _ in 0..10 {
        if limiter
            .admit_client("d", &rpm(9), 0, Instant::now())
            .await
            .is_ok()
        {
            ok += 1;
        }
    }
    assert_eq!(ok, 3, "9 rpm divided by 3 replicas while Redis is down");
    redis.restart();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut ok = 0;
    for _ in 0..12 {
        if limiter
            .admit_client("e", &rpm(9), 0, Instant::now())
            .await
            .is_ok()
        {
            ok += 1;
        }
    }
    assert_eq!(ok, 9, "shared again once Redis answers");
}

/// Not a timing assertion: prints what one shared decision costs (one script round trip
/// to a local Redis), sequential and 64 in flight, for the notes. Debug build figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_of_a_shared_decision() {
    let redis = Redis::start();
    let limiter = Arc::new(limiter(&redis, 1));
    let lim = rpm(10_000_000);
    let _warm = limiter
        .admit_client("warm", &lim, 0, Instant::now())
        .await
        .unwrap();
    let calls = 2000;
    let started = std::time::Instant::now();
    for _ in 0..calls {
        let grant = limiter
            .admit_client("seq", &lim, 0, Instant::now())
            .await
            .unwrap();
        grant.settle(0, Instant::now());
    }
    let seq = started.elapsed() / calls;
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                for _ in 0..calls / 64 {
                    let grant = limiter
                        .admit_client("par", &lim, 0, Instant::now())
                        .await
                        .unwrap();
                    drop(grant);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let per = started.elapsed() / (calls / 64 * 64);
    eprintln!("shared admit: {seq:?} per call sequential, {per:?} per call with 64 in flight");
}

/// R15.1, R17.1 end to end: three real replicas on one Redis, a client with `rpm: 10`, 60
/// concurrent requests spread round-robin — exactly 10 are admitted in total; the others
/// get 429 with the OpenAI headers and never reach an upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpm_10_admits_exactly_10_across_three_replicas_end_to_end() {
    let redis = Redis::start();
    let mocks = crate::replicas::fleet::mocks().await;
    let fleet = crate::replicas::fleet::Fleet::start(&redis, &mocks);
    let mut tasks = Vec::new();
    for i in 0..60 {
        let (http, base) = (fleet.http.clone(), fleet.replicas[i % 3].base.clone());
        tasks.push(tokio::spawn(async move {
            let resp = http
                .post(format!("{base}/v1/chat/completions"))
                .bearer_auth(crate::replicas::fleet::LIMITED)
                .json(&serde_json::json!({"model": "s", "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .expect("request");
            let limit = resp
                .headers()
                .get("x-ratelimit-limit-requests")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            (resp.status().as_u16(), limit)
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            (200, _) => ok += 1,
            (429, limit) => assert_eq!(limit.as_deref(), Some("10")),
            (s, _) => panic!("unexpected status {s}\n{}", fleet.logs()),
        }
    }
    assert_eq!(
        ok,
        10,
        "exactly the limit across the replicas\n{}",
        fleet.logs()
    );
    let upstream = mocks["s1"].requests().len() + mocks["s2"].requests().len();
    assert_eq!(upstream, 10, "refused requests never reach an upstream");
}
