//! Paused-time tests of concurrency permits (R15.1: held for the whole request, released on
//! every exit path), the per-upstream-key limiter (R15.3), and the store's memory bounds.
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{advance, sleep, Instant};

use crate::limits::{Bounds, ClientLimits, KeyLimits, Kind, Limiter, Local, Room, Store, Subject};

const SEC: Duration = Duration::from_secs(1);

fn conc(n: u32) -> ClientLimits {
    ClientLimits {
        concurrency: n,
        ..ClientLimits::default()
    }
}

fn in_flight(l: &Limiter<Local>, client: &str) -> u32 {
    l.store()
        .existing(Subject::Client(client))
        .map_or(0, |c| c.lock().in_flight())
}

#[tokio::test(start_paused = true)]
async fn concurrency_is_held_until_drop_and_refused_meanwhile() {
    let limiter = Limiter::local(Bounds::default());
    let now = Instant::now();
    let admission = limiter.admit_client_now("c", &conc(2), 0, now).unwrap();
    let second = limiter.admit_client_now("c", &conc(2), 0, now).unwrap();
    let refusal = limiter.admit_client_now("c", &conc(2), 0, now).unwrap_err();
    assert_eq!(refusal.kind, Kind::Concurrency);
    assert_eq!(refusal.retry_after, Some(SEC));
    assert_eq!(refusal.numbers().unwrap().remaining, 0);
    drop(admission); // an error path
    let admission = limiter.admit_client_now("c", &conc(2), 0, now).unwrap();
    second.settle(0, now); // a success
    admission.cancel(now); // never reached an upstream
    assert_eq!(in_flight(&limiter, "c"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_permit_moved_into_a_streaming_task_is_held_until_the_stream_ends() {
    let limiter = Arc::new(Limiter::local(Bounds::default()));
    let admission = limiter
        .admit_client_now("s", &conc(1), 0, Instant::now())
        .unwrap();
    let relay = tokio::spawn(async move {
        sleep(30 * SEC).await; // a long stream
        admission.settle(10, Instant::now());
    });
    advance(29 * SEC).await;
    assert!(limiter
        .admit_client_now("s", &conc(1), 0, Instant::now())
        .is_err());
    relay.await.unwrap();
    assert_eq!(in_flight(&limiter, "s"), 0);
    assert!(limiter
        .admit_client_now("s", &conc(1), 0, Instant::now())
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn an_aborted_task_releases_its_permit() {
    let limiter = Arc::new(Limiter::local(Bounds::default()));
    let l2 = limiter.clone();
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let admission = l2
            .admit_client_now("x", &conc(1), 0, Instant::now())
            .unwrap();
        let _ = held_tx.send(());
        sleep(3600 * SEC).await; // a client that went away mid-stream
        admission.settle(0, Instant::now());
    });
    held_rx.await.unwrap();
    assert_eq!(in_flight(&limiter, "x"), 1);
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(in_flight(&limiter, "x"), 0);
    assert!(limiter
        .admit_client_now("x", &conc(1), 0, Instant::now())
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_panicking_task_releases_its_permit() {
    let limiter = Arc::new(Limiter::local(Bounds::default()));
    let l2 = limiter.clone();
    let task = tokio::spawn(async move {
        let _a = l2
            .admit_client_now("p", &conc(1), 0, Instant::now())
            .unwrap();
        panic!("handler bug");
    });
    assert!(task.await.unwrap_err().is_panic());
    assert_eq!(in_flight(&limiter, "p"), 0);
}

#[tokio::test(start_paused = true)]
async fn an_unlimited_client_costs_no_state() {
    let limiter = Limiter::local(Bounds::default());
    let admission =
        limiter.admit_client_now("free", &ClientLimits::default(), 1_000_000, Instant::now());
    assert!(admission.unwrap().report() == Default::default());
    assert!(limiter.store().is_empty());
    let free = ClientLimits::default();
    assert!(limiter
        .admit_client("free", &free, 5, Instant::now())
        .await
        .is_ok());
    assert!(limiter.store().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_async_path_runs_the_same_admission() {
    let limiter = Limiter::local(Bounds::default());
    let lim = ClientLimits {
        rpm: 2,
        ..ClientLimits::default()
    };
    let now = Instant::now();
    let _a = limiter.admit_client("z", &lim, 0, now).await.unwrap();
    let _b = limiter.admit_client_now("z", &lim, 0, now).unwrap();
    assert_eq!(
        limiter
            .admit_client("z", &lim, 0, now)
            .await
            .unwrap_err()
            .kind,
        Kind::Rpm
    );
}

fn key_lim() -> KeyLimits {
    KeyLimits {
        rpm: 10,
        tpm: 1000,
        concurrency: 4,
    }
}

#[tokio::test(start_paused = true)]
async fn key_room_is_a_look_and_take_key_takes() {
    let limiter = Limiter::local(Bounds::default());
    let now = Instant::now();
    for _ in 0..100 {
        assert_eq!(
            limiter.key_room("oa", "fp1", &key_lim(), 100, now),
            Room::Now
        );
    }
    assert_eq!(
        limiter.key_remaining_fraction("oa", "fp1", &key_lim(), now),
        1.0
    );
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(
            limiter
                .take_key_now("oa", "fp1", &key_lim(), 100, now)
                .unwrap(),
        );
    }
    // Concurrency 4 of 4 is the tightest: no room, fraction 0.
    assert_eq!(
        limiter.key_room("oa", "fp1", &key_lim(), 100, now),
        Room::After(SEC)
    );
    assert_eq!(
        limiter.key_remaining_fraction("oa", "fp1", &key_lim(), now),
        0.0
    );
    for a in held.drain(..) {
        a.settle(100, now);
    }
    // rpm 6/10 and tpm 600/1000 left: the tightest is 0.6.
    let fraction = limiter.key_remaining_fraction("oa", "fp1", &key_lim(), now);
    assert!((fraction - 0.6).abs() < 1e-9, "{fraction}");
    assert_eq!(
        limiter.key_room("oa", "fp1", &key_lim(), 5000, now),
        Room::Never
    );
    assert_eq!(
        limiter.key_room("oa", "fp1", &key_lim(), 700, now),
        Room::After(61 * SEC)
    );
    // Another key of the channel, the same fingerprint elsewhere, a client of that name: untouched.
    assert_eq!(
        limiter.key_remaining_fraction("oa", "fp2", &key_lim(), now),
        1.0
    );
    assert_eq!(
        limiter.key_remaining_fraction("ob", "fp1", &key_lim(), now),
        1.0
    );
    assert_eq!(
        limiter
            .client_report("oa", &conc(1), now)
            .get(Kind::Concurrency)
            .unwrap()
            .remaining,
        1
    );
    // An unlimited key always has room.
    let free = KeyLimits::default();
    assert_eq!(
        limiter.key_room("oa", "fp1", &free, u64::MAX, now),
        Room::Now
    );
    assert_eq!(limiter.key_remaining_fraction("oa", "fp1", &free, now), 1.0);
}

#[tokio::test(start_paused = true)]
async fn take_key_refuses_when_the_budget_is_spent() {
    let limiter = Limiter::local(Bounds::default());
    let now = Instant::now();
    for _ in 0..10 {
        limiter
            .take_key("oa", "k", &key_lim(), 10, now)
            .await
            .unwrap()
            .settle(10, now);
    }
    let refusal = limiter
        .take_key_now("oa", "k", &key_lim(), 10, now)
        .unwrap_err();
    assert_eq!(
        (refusal.kind, refusal.retry_after),
        (Kind::Rpm, Some(61 * SEC))
    );
    advance(61 * SEC).await;
    assert!(limiter
        .take_key_now("oa", "k", &key_lim(), 10, Instant::now())
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn sweep_drops_idle_unheld_state_only() {
    let limiter = Limiter::local(Bounds::default());
    let lim = ClientLimits {
        rpm: 5,
        concurrency: 5,
        ..ClientLimits::default()
    };
    let held = limiter
        .admit_client_now("held", &lim, 0, Instant::now())
        .unwrap();
    limiter
        .admit_client_now("done", &lim, 0, Instant::now())
        .unwrap()
        .settle(0, Instant::now());
    assert_eq!(limiter.sweep(Instant::now()), 0);
    advance(61 * SEC).await;
    assert_eq!(limiter.sweep(Instant::now()), 1);
    assert_eq!(limiter.store().len(), 1);
    drop(held);
    assert_eq!(limiter.sweep(Instant::now()), 1);
    assert!(limiter.store().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_store_stays_bounded_and_never_evicts_a_held_cell() {
    let store = Local::new(Bounds {
        max_subjects: 4,
        shards: 1,
    });
    let lim = ClientLimits {
        rpm: 100,
        concurrency: 1,
        ..ClientLimits::default()
    }
    .ask(0);
    let now = Instant::now();
    let held = store.admit_now(Subject::Client("keep"), &lim, now).unwrap();
    for i in 0..50 {
        let name = format!("c{i}");
        let grant = store
            .admit(Subject::Client(&name), &lim, now)
            .await
            .unwrap();
        drop(grant);
        assert!(store.len() <= 4, "{} cells", store.len());
    }
    // The held client kept its count: its one permit is still taken.
    let refusal = store
        .admit_now(Subject::Client("keep"), &lim, now)
        .unwrap_err();
    assert_eq!(refusal.kind, Kind::Concurrency);
    drop(held);
}
