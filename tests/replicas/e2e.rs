//! Three real switchyard processes sharing one private Redis (R17.1, R17.2):
//! requests spread round-robin; a breaker opened on replica 1 keeps 2 and 3 off the channel
//! and one half-open probe runs across the three; a sticky binding made on 1 is used by 2
//! and 3; an admin disable on 2 is honoured by 1 and 3 within a second; Redis killed mid-run
//! (requests keep flowing, `switchyard_shared_state_up` 0, one log line) and restarted
//! empty (state converges).

use std::time::{Duration, Instant};

use crate::replicas::fleet::{chat_to, mocks, Fleet};
use crate::support::external::Redis;
use switchyard_mock::Behavior;

/// R6.1 + R17.1: a breaker opened on replica 1 is honoured by 2 and 3 (the channel's
/// upstream sees no call from them), and one half-open probe runs across the three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_is_shared_and_one_probe_runs_across_replicas() {
    let redis = Redis::start();
    let mocks = mocks().await;
    let fleet = Fleet::start(&redis, &mocks);
    let f = &fleet;
    mocks["bad"].set_default(Behavior::Status {
        code: 500,
        body: None,
    });
    for _ in 0..2 {
        let (s, route) = f.chat(0, "m", None).await;
        assert_eq!((s, route.as_str()), (200, "bad->good"));
    }
    for i in 1..3 {
        let seen = f
            .until(i, Duration::from_secs(1), |i| async move {
                f.channel(i, "bad").await["health"]["breaker"]["state"] == "open"
            })
            .await;
        let seen = seen.unwrap_or_else(|| {
            panic!(
                "replica sees the open breaker within a second; logs:\n{}",
                f.logs()
            )
        });
        eprintln!("replica {} saw the open breaker after {seen:?}", i + 1);
    }
    mocks["bad"].reset();
    for k in 0..9 {
        let (s, route) = f.chat(k % 3, "m", None).await;
        assert_eq!((s, route.as_str()), (200, "good"), "request {k}");
    }
    assert_eq!(
        mocks["bad"].calls(),
        0,
        "no replica called the open channel"
    );

    // Half-open: bad answers again, but slowly, so the probe is in flight for a while.
    mocks["bad"].set_default(Behavior::Ok);
    mocks["bad"].push(Behavior::HangBeforeHeaders(Duration::from_millis(1500)));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // Waves of requests to all three replicas while the probe hangs upstream.
    let started = Instant::now();
    let mut tasks = Vec::new();
    while started.elapsed() < Duration::from_millis(1100) {
        for r in &f.replicas {
            tasks.push(tokio::spawn(chat_to(
                f.http.clone(),
                r.base.clone(),
                "m",
                None,
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        mocks["bad"].calls(),
        1,
        "one half-open probe across the three replicas while it is in flight"
    );
    for t in tasks {
        assert_eq!(
            t.await.unwrap().0,
            200,
            "every request answered (good, or the probe)"
        );
    }
    // The probe succeeded: the breaker closes everywhere and bad serves all replicas.
    for i in 0..3 {
        let closed = f
            .until(i, Duration::from_secs(1), |i| async move {
                f.channel(i, "bad").await["health"]["breaker"]["state"] == "closed"
            })
            .await;
        assert!(closed.is_some(), "replica {} closed", i + 1);
        let (s, route) = f.chat(i, "m", None).await;
        assert_eq!((s, route.as_str()), (200, "bad"));
    }
}

/// R8.3 + R17.1: bindings made on replica 1 are used by 2 and 3 (their first request with
/// each key goes to the bound channel), and an admin disable on 2 is honoured by 1 and 3
/// within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sticky_bindings_and_admin_disables_are_shared() {
    let redis = Redis::start();
    let mocks = mocks().await;
    let fleet = Fleet::start(&redis, &mocks);
    let f = &fleet;
    let mut bound = Vec::new();
    // 16 keys: both channels get bindings but with a chance of 2^-15 (each first turn is
    // drawn by weight).
    for k in 0..16 {
        let conv = format!("conv-{k}");
        let (s, route) = f.chat(0, "s", Some(&conv)).await;
        assert_eq!(s, 200);
        bound.push((conv, route));
    }
    assert!(
        bound.iter().any(|(_, r)| r == "s1") && bound.iter().any(|(_, r)| r == "s2"),
        "both channels got bindings: {bound:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (conv, route) in &bound {
        for i in 1..3 {
            let (s, r) = f.chat(i, "s", Some(conv)).await;
            assert_eq!((s, &r), (200, route), "{conv} on replica {}", i + 1);
        }
    }

    assert_eq!(
        f.admin_post(1, "/admin/channels/s1/disable?reason=maintenance")
            .await,
        200
    );
    for i in [0, 2] {
        let seen = f
            .until(i, Duration::from_secs(1), |i| async move {
                f.channel(i, "s1").await["enabled"] == false
            })
            .await
            .expect("the disable is honoured within a second");
        eprintln!("replica {} saw the admin disable after {seen:?}", i + 1);
        for (conv, _) in &bound {
            let (s, r) = f.chat(i, "s", Some(conv)).await;
            assert_eq!(
                (s, r.as_str()),
                (200, "s2"),
                "{conv}: s1 is disabled everywhere"
            );
        }
    }
    assert_eq!(f.admin_post(2, "/admin/channels/s1/enable").await, 200);
    for i in [0, 1] {
        f.until(i, Duration::from_secs(1), |i| async move {
            f.channel(i, "s1").await["enabled"] == true
        })
        .await
        .expect("the enable is honoured within a second");
    }
}

/// R17.2: Redis killed mid-run — requests keep flowing, `switchyard_shared_state_up` is 0,
/// each replica says so in ONE log line; a disable made meanwhile stays local. Redis
/// restarted empty — the replicas converge (the disable reaches the others).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_keeps_serving_and_replicas_converge_when_it_returns() {
    let mut redis = Redis::start();
    let mocks = mocks().await;
    let fleet = Fleet::start(&redis, &mocks);
    let f = &fleet;
    for i in 0..3 {
        f.until(i, Duration::from_secs(3), |i| async move {
            f.metric(i, "switchyard_shared_state_up").await == Some(1.0)
        })
        .await
        .expect("shared state up");
    }
    // The hot path: requests that need no shared decision (no limit, healthy channels, no
    // sticky key) make no Redis round trip — only the runtimes' periodic exchanges run.
    let before = redis_commands(&redis);
    for k in 0..60 {
        let (s, _) = f.chat(k % 3, "s", None).await;
        assert_eq!(s, 200);
    }
    let spent = redis_commands(&redis) - before;
    eprintln!("60 requests: {spent} Redis commands (periodic exchanges included)");
    assert!(spent < 30, "{spent} Redis commands for 60 requests");

    redis.stop();
    for k in 0..30 {
        let (s, _) = f.chat(k % 3, "s", None).await;
        assert_eq!(s, 200, "request {k} served while Redis is down");
    }
    for i in 0..3 {
        f.until(i, Duration::from_secs(2), |i| async move {
            f.metric(i, "switchyard_shared_state_up").await == Some(0.0)
        })
        .await
        .expect("shared_state_up goes to 0");
    }
    assert_eq!(f.admin_post(0, "/admin/channels/s2/disable").await, 200);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        f.channel(2, "s2").await["enabled"],
        true,
        "not shared while Redis is down"
    );
    for (i, r) in f.replicas.iter().enumerate() {
        let log = r.log_text();
        let warnings = log.matches("Redis unreachable").count();
        assert_eq!(
            warnings,
            1,
            "replica {}: one log line for the outage:\n{log}",
            i + 1
        );
    }

    redis.restart();
    for i in 1..3 {
        let waited = f
            .until(i, Duration::from_secs(5), |i| async move {
                f.channel(i, "s2").await["enabled"] == false
            })
            .await
            .expect("the disable made during the outage converges");
        eprintln!(
            "replica {} converged {waited:?} after Redis returned",
            i + 1
        );
        assert_eq!(f.metric(i, "switchyard_shared_state_up").await, Some(1.0));
    }
    for k in 0..6 {
        let (s, r) = f.chat(k % 3, "s", None).await;
        assert_eq!((s, r.as_str()), (200, "s1"));
    }
}

/// Commands the server has processed (INFO stats), through `redis-cli`.
fn redis_commands(redis: &Redis) -> i64 {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "INFO", "stats"])
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_commands_processed")
}
