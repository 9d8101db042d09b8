//! State-machine tests of the breaker on paused tokio time (R6.1–R6.3, R2.5).
use super::*;
use crate::routing::family::PathFamily;
use crate::routing::policy::{Outcome, OutcomeFacts};
use std::sync::Arc;

/// The breaker verdict of `o` on a channel with `mapping` (its facts derived first).
fn verdict(
    outcome: &Outcome,
    mapping: &std::collections::BTreeMap<u16, u16>,
    elapsed: Duration,
    cfg: &crate::config::model::Breaker,
) -> Verdict {
    let facts = OutcomeFacts::of(outcome, mapping, PathFamily::Chat);
    crate::state::outcome::verdict(&facts, elapsed, cfg)
}

fn lim(fail: u32, succ: u32, timeout_ms: u64) -> Limits {
    Limits {
        failure_threshold: fail,
        success_threshold: succ,
        timeout: Duration::from_millis(timeout_ms),
    }
}

fn fail(breakers: &Breakers, limits: &Limits, times: u32) {
    for _ in 0..times {
        let (admission, _) = breakers.acquire(limits, None, Instant::now());
        breakers.record(
            limits,
            None,
            Verdict::Failure,
            admission == Admission::Probe,
            Instant::now(),
        );
    }
}

#[tokio::test(start_paused = true)]
async fn opens_after_threshold_consecutive_failures() {
    let breakers = Breakers::default();
    let limits = lim(3, 2, 1000);
    fail(&breakers, &limits, 2);
    breakers.record(&limits, None, Verdict::Success, false, Instant::now());
    fail(&breakers, &limits, 2);
    assert!(
        breakers.would_admit(&limits, None, Instant::now()),
        "a success resets the count"
    );
    fail(&breakers, &limits, 1);
    assert!(!breakers.would_admit(&limits, None, Instant::now()));
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Refused
    );
    assert_eq!(
        breakers.provider().state(&limits, Instant::now()),
        State::Open
    );
}

#[tokio::test(start_paused = true)]
async fn exactly_one_probe_under_concurrency_after_timeout() {
    let breakers = Arc::new(Breakers::default());
    let limits = lim(1, 1, 1000);
    fail(&breakers, &limits, 1);
    tokio::time::advance(Duration::from_millis(999)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Refused
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(breakers.would_admit(&limits, None, Instant::now()));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let breakers = breakers.clone();
        tasks.push(tokio::spawn(async move {
            breakers.acquire(&limits, None, Instant::now()).0
        }));
    }
    let mut probes = 0;
    for t in tasks {
        match t.await.unwrap() {
            Admission::Probe => probes += 1,
            Admission::Refused => {}
            Admission::Admitted => panic!("half-open admitted normal traffic"),
        }
    }
    assert_eq!(probes, 1);
    assert!(
        !breakers.would_admit(&limits, None, Instant::now()),
        "probe in flight"
    );
    assert_eq!(
        breakers.provider().state(&limits, Instant::now()),
        State::HalfOpen
    );
}

#[tokio::test(start_paused = true)]
async fn success_threshold_probes_close_it() {
    let breakers = Breakers::default();
    let limits = lim(1, 2, 100);
    fail(&breakers, &limits, 1);
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
    let (t, s) = breakers.record(&limits, None, Verdict::Success, true, Instant::now());
    assert_eq!((t, s), (None, State::HalfOpen), "one success of two");
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
    let (t, s) = breakers.record(&limits, None, Verdict::Success, true, Instant::now());
    assert_eq!(s, State::Closed);
    assert_eq!(
        t,
        Some(Transition {
            from: State::HalfOpen,
            to: State::Closed
        })
    );
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Admitted
    );
}

#[tokio::test(start_paused = true)]
async fn failed_probe_reopens_with_a_fresh_timeout() {
    let breakers = Breakers::default();
    let limits = lim(1, 1, 100);
    fail(&breakers, &limits, 1);
    tokio::time::advance(Duration::from_millis(150)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
    let (_, s) = breakers.record(&limits, None, Verdict::Failure, true, Instant::now());
    assert_eq!(s, State::Open);
    tokio::time::advance(Duration::from_millis(99)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Refused
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
}

#[tokio::test(start_paused = true)]
async fn neutral_probe_releases_the_slot_and_a_lost_probe_expires() {
    let breakers = Breakers::default();
    let limits = lim(1, 1, 100);
    fail(&breakers, &limits, 1);
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
    breakers.record(&limits, None, Verdict::Neutral, true, Instant::now());
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
    // This probe's result never comes back (request dropped): the slot frees after `timeout`.
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Refused
    );
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(
        breakers.acquire(&limits, None, Instant::now()).0,
        Admission::Probe
    );
}

#[tokio::test(start_paused = true)]
async fn counters_survive_a_threshold_change() {
    let breakers = Breakers::default();
    let five = lim(5, 2, 1000);
    fail(&breakers, &five, 3);
    assert!(breakers.would_admit(&five, None, Instant::now()));
    // Reload lowers the threshold to 4: the fourth failure opens it.
    let four = lim(4, 2, 1000);
    fail(&breakers, &four, 1);
    assert!(!breakers.would_admit(&four, None, Instant::now()));
}

#[tokio::test(start_paused = true)]
async fn disabled_breaker_always_admits_and_keeps_counters() {
    let breakers = Breakers::default();
    let on = lim(2, 1, 1000);
    fail(&breakers, &on, 2);
    assert!(!breakers.would_admit(&on, None, Instant::now()));
    let off = lim(0, 1, 1000);
    assert!(breakers.would_admit(&off, None, Instant::now()));
    assert_eq!(
        breakers.acquire(&off, None, Instant::now()).0,
        Admission::Admitted
    );
    assert!(
        !breakers.would_admit(&on, None, Instant::now()),
        "state kept for re-enable"
    );
}

#[test]
fn limits_follow_enabled_flag() {
    let mut cfg = crate::config::merge::default_resilience().circuit_breaker;
    assert_eq!(Limits::of(&cfg).failure_threshold, 5);
    cfg.enabled = false;
    assert_eq!(Limits::of(&cfg).failure_threshold, 0);
}

#[tokio::test(start_paused = true)]
async fn model_scope_is_separate_per_model() {
    let breakers = Breakers::default();
    let limits = lim(1, 1, 1000);
    let (a, _) = breakers.acquire(&limits, Some("m1"), Instant::now());
    breakers.record(
        &limits,
        Some("m1"),
        Verdict::Failure,
        a == Admission::Probe,
        Instant::now(),
    );
    assert!(!breakers.would_admit(&limits, Some("m1"), Instant::now()));
    assert!(breakers.would_admit(&limits, Some("m2"), Instant::now()));
    assert!(breakers.would_admit(&limits, None, Instant::now()));
    assert_eq!(
        breakers.models_not_closed(&limits, Instant::now()),
        vec![("m1".to_string(), State::Open)]
    );
}

#[tokio::test(start_paused = true)]
async fn model_scope_cap_evicts_oldest_idle_closed_and_keeps_open() {
    let breakers = Breakers::default();
    let limits = lim(1, 1, 3_600_000);
    // One open breaker, then fill the rest with closed ones.
    breakers.acquire(&limits, Some("open"), Instant::now());
    breakers.record(
        &limits,
        Some("open"),
        Verdict::Failure,
        false,
        Instant::now(),
    );
    for i in 0..MODEL_CAP - 1 {
        tokio::time::advance(Duration::from_millis(1)).await;
        breakers.acquire(&limits, Some(&format!("m{i}")), Instant::now());
    }
    assert_eq!(breakers.model_count(), MODEL_CAP);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        breakers.acquire(&limits, Some("new"), Instant::now()).0,
        Admission::Admitted
    );
    assert_eq!(breakers.model_count(), MODEL_CAP);
    assert!(
        !breakers.would_admit(&limits, Some("open"), Instant::now()),
        "open kept"
    );
    let names: Vec<String> = breakers.model_names();
    assert!(
        !names.contains(&"m0".to_string()),
        "oldest idle closed evicted"
    );
    assert!(names.contains(&"m1".to_string()));
    // Idle ones expire after 10 minutes.
    tokio::time::advance(MODEL_IDLE).await;
    breakers.acquire(&limits, Some("later"), Instant::now());
    assert_eq!(
        breakers.model_count(),
        2,
        "only the open one and the new one stay"
    );
}

#[tokio::test(start_paused = true)]
async fn model_scope_full_of_open_breakers_refuses_new_models() {
    let breakers = Breakers::default();
    let limits = lim(1, 1, 3_600_000);
    for i in 0..MODEL_CAP {
        let model = format!("m{i}");
        breakers.acquire(&limits, Some(&model), Instant::now());
        breakers.record(
            &limits,
            Some(&model),
            Verdict::Failure,
            false,
            Instant::now(),
        );
    }
    assert_eq!(
        breakers.acquire(&limits, Some("new"), Instant::now()).0,
        Admission::Refused
    );
}

#[test]
fn verdicts_follow_r6_2() {
    let cfg = crate::config::merge::default_resilience().circuit_breaker;
    let none = std::collections::BTreeMap::new();
    let status = |code| Outcome::Status {
        code,
        error_code: None,
        error_type: None,
        message: String::new(),
    };
    let verdict_of = |o: &Outcome| verdict(o, &none, Duration::ZERO, &cfg);
    assert_eq!(verdict_of(&status(500)), Verdict::Failure);
    assert_eq!(verdict_of(&status(429)), Verdict::Failure);
    for code in [400, 404, 413, 422] {
        assert_eq!(verdict_of(&status(code)), Verdict::Neutral, "{code}");
    }
    assert_eq!(verdict_of(&Outcome::ClientGone), Verdict::Neutral);
    assert_eq!(
        verdict_of(&Outcome::Transport(
            crate::routing::policy::TransportKind::Connect
        )),
        Verdict::Failure
    );
    assert_eq!(verdict_of(&Outcome::Success), Verdict::Success);
    let mut slow = cfg.clone();
    slow.slow_call_threshold = Duration::from_millis(100);
    assert_eq!(
        verdict(&Outcome::Success, &none, Duration::from_millis(150), &slow),
        Verdict::Failure
    );
    assert_eq!(
        verdict(&Outcome::Success, &none, Duration::from_millis(50), &slow),
        Verdict::Success
    );
    let map: std::collections::BTreeMap<u16, u16> = [(400, 503)].into_iter().collect();
    assert_eq!(
        verdict(&status(400), &map, Duration::ZERO, &cfg),
        Verdict::Failure
    );
}
