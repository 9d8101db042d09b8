//! Breaker failures counted by the deployment (R6.1, R17.1, B-shared-failure-counts): two
//! real replicas on one private Redis agree on a closed breaker's failure count, and the
//! failures they see together open the breaker on both — not each replica's own
//! `failure_threshold`. And an open breaker's active probe (R19.2) is sent by one replica per
//! interval for the deployment, not by each replica.

use std::time::Duration;

use crate::replicas::fleet::{mocks, Fleet};
use crate::support::external::Redis;
use switchyard_mock::Behavior;

/// Threshold 4 across two replicas: replica 1 sees 2 failures (replica 2 reads the count
/// 2), replica 2 sees 2 more, and the breaker is open on both within a second; neither
/// calls the channel afterwards. Before the fix each replica counted only its own 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_seen_by_two_replicas_open_the_breaker_on_both() {
    let redis = Redis::start();
    let mocks = mocks().await;
    let breaker = "{failure_threshold: 4, success_threshold: 1, timeout: 30s}";
    let fleet = Fleet::start_with(&redis, &mocks, 2, breaker);
    let f = &fleet;
    for i in 0..2 {
        f.until(i, Duration::from_secs(5), |i| async move {
            f.metric(i, "switchyard_shared_state_up").await == Some(1.0)
        })
        .await
        .expect("replica joined Redis");
    }
    // The subscriptions are taken once Redis answers; give them a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    mocks["bad"].set_default(Behavior::Status {
        code: 500,
        body: None,
    });
    let failures = |i: usize| async move {
        f.channel(i, "bad").await["health"]["breaker"]["consecutive_failures"].as_u64()
    };
    for _ in 0..2 {
        let (s, route) = f.chat(0, "m", None).await;
        assert_eq!((s, route.as_str()), (200, "bad->good"));
    }
    assert_eq!(failures(0).await, Some(2));
    let agreed = f
        .until(1, Duration::from_secs(1), |i| async move {
            failures(i).await == Some(2)
        })
        .await;
    assert!(
        agreed.is_some(),
        "replica 2 reads the deployment's count (it has {:?}); logs:\n{}",
        failures(1).await,
        f.logs()
    );
    for _ in 0..2 {
        let (s, route) = f.chat(1, "m", None).await;
        assert_eq!((s, route.as_str()), (200, "bad->good"));
    }
    assert_eq!(mocks["bad"].calls(), 4);
    for i in 0..2 {
        let seen = f
            .until(i, Duration::from_secs(1), |i| async move {
                f.channel(i, "bad").await["health"]["breaker"]["state"] == "open"
            })
            .await;
        assert!(
            seen.is_some(),
            "replica {} opened the breaker on the fleet's 4 failures: {}; logs:\n{}",
            i + 1,
            f.channel(i, "bad").await["health"]["breaker"],
            f.logs()
        );
    }
    for k in 0..6 {
        let (s, route) = f.chat(k % 2, "m", None).await;
        assert_eq!((s, route.as_str()), (200, "good"), "request {k}");
    }
    assert_eq!(
        mocks["bad"].calls(),
        4,
        "no replica called the open channel"
    );
}

/// A success after failures ends the run for the deployment: the count drops to 0 on
/// both replicas, and 3 more failures (fewer than the threshold) open nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_on_one_replica_resets_the_count_on_both() {
    let redis = Redis::start();
    let mocks = mocks().await;
    let breaker = "{failure_threshold: 4, success_threshold: 1, timeout: 30s}";
    let fleet = Fleet::start_with(&redis, &mocks, 2, breaker);
    let f = &fleet;
    for i in 0..2 {
        f.until(i, Duration::from_secs(5), |i| async move {
            f.metric(i, "switchyard_shared_state_up").await == Some(1.0)
        })
        .await
        .expect("replica joined Redis");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let failures = |i: usize| async move {
        f.channel(i, "bad").await["health"]["breaker"]["consecutive_failures"].as_u64()
    };
    let fail = || Behavior::Status {
        code: 500,
        body: None,
    };
    for _ in 0..3 {
        mocks["bad"].push(fail());
    }
    for i in [0, 1, 0] {
        assert_eq!(f.chat(i, "m", None).await.1, "bad->good");
    }
    let both = |n: u64| async move {
        for i in 0..2 {
            if f.until(i, Duration::from_secs(1), |i| async move {
                failures(i).await == Some(n)
            })
            .await
            .is_none()
            {
                return false;
            }
        }
        true
    };
    assert!(both(3).await, "both count 3; logs:\n{}", f.logs());
    assert_eq!(f.chat(1, "m", None).await.1, "bad", "bad answers again");
    assert!(both(0).await, "the success reset both; logs:\n{}", f.logs());
    for _ in 0..3 {
        mocks["bad"].push(fail());
    }
    for i in [1, 0, 1] {
        assert_eq!(f.chat(i, "m", None).await.1, "bad->good");
    }
    assert!(both(3).await);
    for i in 0..2 {
        assert_eq!(
            f.channel(i, "bad").await["health"]["breaker"]["state"],
            "closed"
        );
    }
}

/// R19.2 in shared mode: two replicas see the same open breaker, but the deployment sends
/// one active probe per interval (the first replica to ask takes the turn in Redis). In
/// 3.5 s at a 1 s interval that is about three probes; a prober per replica sends about six.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_per_interval_sends_the_active_probe() {
    let redis = Redis::start();
    let mocks = mocks().await;
    let breaker = "{failure_threshold: 1, success_threshold: 1, timeout: 60s}";
    let fleet = Fleet::start_probing(&redis, &mocks, 2, breaker, "{enabled: true, interval: 1s}");
    let f = &fleet;
    for i in 0..2 {
        f.until(i, Duration::from_secs(5), |i| async move {
            f.metric(i, "switchyard_shared_state_up").await == Some(1.0)
        })
        .await
        .expect("replica joined Redis");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    mocks["bad"].set_default(Behavior::Status {
        code: 500,
        body: None,
    });
    let (s, route) = f.chat(0, "m", None).await;
    assert_eq!((s, route.as_str()), (200, "bad->good"));
    for i in 0..2 {
        let open = f
            .until(i, Duration::from_secs(2), |i| async move {
                f.channel(i, "bad").await["health"]["breaker"]["state"] == "open"
            })
            .await;
        assert!(open.is_some(), "replica {} sees the breaker open", i + 1);
    }
    let before = mocks["bad"].calls();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let probes = mocks["bad"].calls() - before;
    assert!(
        (1..=4).contains(&probes),
        "{probes} probes in 3.5 s at a 1 s interval from two replicas; logs:\n{}",
        f.logs()
    );
}
