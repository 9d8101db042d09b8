//! Paused-time tests of client limits (R15.1): burst, steady rate, window edges, `rpd` over a
//! day, `tpm` reserve / reconcile / overrun / cut stream, oversize reservations, all-or-nothing.
use std::time::Duration;

use tokio::time::{advance, Instant};

use crate::limits::{Bounds, ClientLimits, Kind, Limiter, Local};

const SEC: Duration = Duration::from_secs(1);

fn limiter() -> Limiter<Local> {
    Limiter::local(Bounds::default())
}

fn rpm(n: u64) -> ClientLimits {
    ClientLimits {
        rpm: n,
        ..ClientLimits::default()
    }
}

fn tpm(n: u64) -> ClientLimits {
    ClientLimits {
        tpm: n,
        ..ClientLimits::default()
    }
}

/// Admit `n` one-token requests of `client` at once, settling each; how many got in.
fn burst(l: &Limiter<Local>, client: &str, lim: &ClientLimits, n: usize) -> usize {
    let now = Instant::now();
    (0..n)
        .filter(|_| match l.admit_client_now(client, lim, 1, now) {
            Ok(a) => {
                a.settle(1, now);
                true
            }
            Err(_) => false,
        })
        .count()
}

#[tokio::test(start_paused = true)]
async fn rpm_admits_a_burst_of_exactly_the_limit() {
    let local = limiter();
    assert_eq!(burst(&local, "alice", &rpm(10), 40), 10);
    let refusal = local
        .admit_client_now("alice", &rpm(10), 1, Instant::now())
        .unwrap_err();
    assert_eq!(refusal.kind, Kind::Rpm);
    let n = refusal.numbers().unwrap();
    assert_eq!((n.limit, n.remaining), (10, 0));
    // Counted in granule 0, which leaves at 61 s.
    assert_eq!(refusal.retry_after, Some(61 * SEC));
    assert_eq!(n.reset, 61 * SEC);
    // Another client is not affected.
    assert_eq!(burst(&local, "bob", &rpm(10), 40), 10);
}

#[tokio::test(start_paused = true)]
async fn rpm_sustains_a_steady_rate_and_refuses_faster() {
    let local = limiter();
    // A request counts for 60 to 61 s (its 1 s granule leaves whole), so pacing at 60 per
    // 61 s is never refused over five minutes …
    for i in 0..300 {
        assert_eq!(burst(&local, "steady", &rpm(60), 1), 1, "request {i}");
        advance(Duration::from_millis(1017)).await;
    }
    // … and pacing at exactly the limit loses at most one request in 61.
    let mut exact = 0;
    for _ in 0..610 {
        exact += burst(&local, "exact", &rpm(60), 1);
        advance(SEC).await;
    }
    assert_eq!(exact, 600);
    // Two a second at rpm 60: 60 in the first minute, then about one a second.
    let mut admitted = Vec::new();
    for i in 0..600u64 {
        if burst(&local, "fast", &rpm(60), 1) == 1 {
            admitted.push(i * 500);
        }
        advance(SEC / 2).await;
    }
    for (i, &t) in admitted.iter().enumerate() {
        let in_window = admitted[..=i].iter().filter(|&&u| u + 60_000 > t).count();
        assert!(
            in_window <= 60,
            "{in_window} admitted in the minute ending at {t} ms"
        );
    }
    assert!(admitted.len() >= 280, "only {} admitted", admitted.len());
}

#[tokio::test(start_paused = true)]
async fn no_double_burst_at_a_minute_boundary() {
    let local = limiter();
    advance(Duration::from_millis(59_900)).await;
    assert_eq!(burst(&local, "edge", &rpm(10), 10), 10);
    advance(Duration::from_millis(200)).await; // past the minute a fixed window would reset
    assert_eq!(burst(&local, "edge", &rpm(10), 10), 0);
    advance(Duration::from_millis(59_899)).await; // 119.999 s
    assert_eq!(burst(&local, "edge", &rpm(10), 10), 0);
    advance(Duration::from_millis(1)).await; // 120 s: granule 59 has left
    assert_eq!(burst(&local, "edge", &rpm(10), 20), 10);
}

#[tokio::test(start_paused = true)]
async fn rpd_holds_for_a_day() {
    let local = limiter();
    let lim = ClientLimits {
        rpd: 5,
        ..ClientLimits::default()
    };
    for _ in 0..5 {
        assert_eq!(burst(&local, "daily", &lim, 1), 1);
        advance(3600 * SEC).await;
    }
    advance(5 * 3600 * SEC).await; // 10 h after the first
    let refusal = local
        .admit_client_now("daily", &lim, 1, Instant::now())
        .unwrap_err();
    assert_eq!(refusal.kind, Kind::Rpd);
    // The first request's 5-minute granule leaves 24 h 5 min after it began.
    let first_leaves = (24 * 3600 + 300) * SEC;
    assert_eq!(refusal.retry_after, Some(first_leaves - 10 * 3600 * SEC));
    advance(refusal.retry_after.unwrap() - Duration::from_millis(1)).await;
    assert_eq!(burst(&local, "daily", &lim, 1), 0);
    advance(Duration::from_millis(1)).await;
    assert_eq!(burst(&local, "daily", &lim, 3), 1);
}

#[tokio::test(start_paused = true)]
async fn tpm_reserves_then_gives_back_the_unused_part() {
    let local = limiter();
    let now = Instant::now();
    let admission = local.admit_client_now("t", &tpm(1000), 600, now).unwrap();
    assert_eq!(admission.report().get(Kind::Tpm).unwrap().remaining, 400);
    let refusal = local
        .admit_client_now("t", &tpm(1000), 500, now)
        .unwrap_err();
    assert_eq!((refusal.kind, refusal.needed), (Kind::Tpm, 500));
    assert!(!refusal.can_never_fit());
    admission.settle(100, now);
    let admission = local.admit_client_now("t", &tpm(1000), 500, now).unwrap();
    assert_eq!(admission.report().get(Kind::Tpm).unwrap().remaining, 400);
}

#[tokio::test(start_paused = true)]
async fn tpm_takes_an_overrun_and_makes_later_requests_wait() {
    let local = limiter();
    let admission = local
        .admit_client_now("o", &tpm(1000), 100, Instant::now())
        .unwrap();
    advance(10 * SEC).await;
    admission.settle(1500, Instant::now()); // 100 at 0 s, 1400 more at 10 s
    let refusal = local
        .admit_client_now("o", &tpm(1000), 1, Instant::now())
        .unwrap_err();
    assert_eq!(refusal.kind, Kind::Tpm);
    assert_eq!(refusal.numbers().unwrap().remaining, 0);
    // Both granules must leave before anything fits: the overrun's leaves at 71 s.
    assert_eq!(refusal.retry_after, Some(61 * SEC));
    advance(61 * SEC).await;
    assert!(local
        .admit_client_now("o", &tpm(1000), 1000, Instant::now())
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_is_charged_what_it_used_and_a_dropped_one_its_reservation() {
    let local = limiter();
    let now = Instant::now();
    let cut = local.admit_client_now("s", &tpm(1000), 800, now).unwrap();
    cut.settle(300, now); // the stream was cut after 300 tokens
    assert_eq!(
        local
            .client_report("s", &tpm(1000), now)
            .get(Kind::Tpm)
            .unwrap()
            .remaining,
        700
    );

    let local = limiter();
    let lost = local.admit_client_now("s", &tpm(1000), 800, now).unwrap();
    drop(lost); // the task died before it could settle: the reservation stays charged
    assert_eq!(
        local
            .client_report("s", &tpm(1000), now)
            .get(Kind::Tpm)
            .unwrap()
            .remaining,
        200
    );
}

#[tokio::test(start_paused = true)]
async fn a_reservation_larger_than_the_limit_can_never_fit() {
    let local = limiter();
    let lim = ClientLimits {
        rpm: 5,
        tpm: 1000,
        ..ClientLimits::default()
    };
    let refusal = local
        .admit_client_now("big", &lim, 1001, Instant::now())
        .unwrap_err();
    assert_eq!(refusal.kind, Kind::Tpm);
    assert!(refusal.can_never_fit());
    assert_eq!(refusal.retry_after, None);
    let msg = refusal.to_string();
    assert!(
        msg.contains("1001 tokens") && msg.contains("1000 tokens per minute"),
        "{msg}"
    );
    assert!(msg.contains("never") && msg.contains("max_tokens"), "{msg}");
    // Still never after any wait, even with rpm exhausted too: never wins over a wait.
    assert_eq!(burst(&local, "big", &lim, 5), 5);
    let refusal = local
        .admit_client_now("big", &lim, 5000, Instant::now())
        .unwrap_err();
    assert!(refusal.can_never_fit() && refusal.kind == Kind::Tpm);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_by_one_limit_takes_nothing_from_the_others() {
    let local = limiter();
    let lim = ClientLimits {
        rpm: 5,
        rpd: 100,
        tpm: 1000,
        concurrency: 0,
    };
    let now = Instant::now();
    let rep = |local: &Limiter<Local>| local.client_report("aon", &lim, now);
    let _ = local.admit_client_now("aon", &lim, 2000, now).unwrap_err();
    assert_eq!(rep(&local).get(Kind::Rpm).unwrap().remaining, 5);
    local
        .admit_client_now("aon", &lim, 1000, now)
        .unwrap()
        .settle(1000, now);
    for _ in 0..10 {
        let refusal = local.admit_client_now("aon", &lim, 1, now).unwrap_err();
        assert_eq!(refusal.kind, Kind::Tpm);
    }
    assert_eq!(rep(&local).get(Kind::Rpm).unwrap().remaining, 4);
    assert_eq!(rep(&local).get(Kind::Rpd).unwrap().remaining, 99);
    // And the other way round: refused by rpm, no tokens reserved.
    let local = limiter();
    assert_eq!(burst(&local, "aon", &lim, 5), 5);
    let _ = local.admit_client_now("aon", &lim, 500, now).unwrap_err();
    assert_eq!(rep(&local).get(Kind::Tpm).unwrap().remaining, 995);
}

#[tokio::test(start_paused = true)]
async fn the_longest_wait_names_the_refusal() {
    let local = limiter();
    let lim = ClientLimits {
        rpm: 2,
        tpm: 100,
        ..ClientLimits::default()
    };
    local
        .admit_client_now("w", &lim, 0, Instant::now())
        .unwrap()
        .settle(0, Instant::now());
    advance(30 * SEC).await;
    local
        .admit_client_now("w", &lim, 100, Instant::now())
        .unwrap()
        .settle(100, Instant::now());
    advance(SEC).await;
    // rpm frees at 61 s (30 s from now), tpm at 91 s (60 s from now): tpm names it.
    let refusal = local
        .admit_client_now("w", &lim, 50, Instant::now())
        .unwrap_err();
    assert_eq!(refusal.kind, Kind::Tpm);
    assert_eq!(refusal.retry_after, Some(60 * SEC));
    assert_eq!(refusal.report.get(Kind::Rpm).unwrap().remaining, 0);
    assert_eq!(refusal.report.get(Kind::Rpm).unwrap().reset, 60 * SEC);
}

#[tokio::test(start_paused = true)]
async fn cancel_gives_everything_back() {
    let local = limiter();
    let lim = ClientLimits {
        rpm: 1,
        rpd: 1,
        tpm: 100,
        concurrency: 1,
    };
    let now = Instant::now();
    for _ in 0..5 {
        local
            .admit_client_now("c", &lim, 100, now)
            .unwrap()
            .cancel(now);
    }
    let rep = local.client_report("c", &lim, now);
    for k in Kind::ALL {
        let n = rep.get(k).unwrap();
        assert_eq!(n.remaining, n.limit, "{k:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn limits_changed_by_a_reload_apply_to_the_counts_so_far() {
    let local = limiter();
    assert_eq!(burst(&local, "r", &rpm(10), 10), 10);
    assert_eq!(burst(&local, "r", &rpm(15), 10), 5);
    assert_eq!(burst(&local, "r", &rpm(5), 10), 0);
}
