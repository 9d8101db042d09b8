//! Table tests for the outcome classifier (R4.4, R4.5, R10.1, R10.3, R10.5).
use std::collections::BTreeMap;

use super::*;

/// The shipped defaults, from the config loader itself: the tables pin what users get.
pub(crate) fn defaults() -> crate::config::model::Config {
    let env = std::collections::HashMap::new();
    crate::config::load_str("", std::path::Path::new("defaults.yaml"), &env)
        .expect("an empty config loads with every default")
}

pub(crate) fn routing() -> Routing {
    defaults().routing
}

pub(crate) fn retry() -> Retry {
    defaults().resilience.retry
}

fn images_cfg(enabled: bool, ambiguous: bool, uncertain: bool) -> ImagesFailover {
    ImagesFailover {
        enabled,
        include_ambiguous: ambiguous,
        include_uncertain: uncertain,
        key_retry_budget: 1,
    }
}

pub(crate) fn facts() -> Facts {
    Facts {
        family: PathFamily::Chat,
        has_idempotency_key: false,
        is_task: false,
        alternatives_left: true,
        same_target_retries: 0,
        attempts_left: 3,
        affinity_skip_retry: false,
        breaker_admitted: true,
        time_left: std::time::Duration::from_secs(3600),
        retry_backoff: std::time::Duration::ZERO,
        retry_budget: true,
    }
}

pub(crate) fn status(code: u16) -> Outcome {
    Outcome::Status {
        code,
        error_code: None,
        error_type: None,
        message: String::new(),
    }
}

pub(crate) struct Env {
    pub(crate) routing: Routing,
    pub(crate) retry: Retry,
    pub(crate) images: ImagesFailover,
    pub(crate) mapping: BTreeMap<u16, u16>,
}

impl Env {
    pub(crate) fn new() -> Self {
        Env {
            routing: routing(),
            retry: retry(),
            images: images_cfg(false, false, false),
            mapping: BTreeMap::new(),
        }
    }
    pub(crate) fn run(&self, outcome: &Outcome, facts: &Facts) -> Decision {
        let settings = Settings {
            routing: &self.routing,
            retry: &self.retry,
            images: &self.images,
        };
        classify(
            &OutcomeFacts::of(outcome, &self.mapping, facts.family),
            facts,
            &settings,
        )
    }
}

use Decision::*;
const FO: Decision = FailOver { key_fault: false };
const FOK: Decision = FailOver { key_fault: true };

#[test]
fn failover_status_ranges_table() {
    let env = Env::new();
    // (code, fails over?) — one row of R4.4's default ranges per range, probing both ends.
    let rows: &[(u16, bool)] = &[
        (100, true),
        (199, true),
        (200, false),
        (299, false),
        (300, true),
        (399, true),
        (400, false),
        (401, true),
        (404, true),
        (407, true),
        (408, false),
        (409, true),
        (429, true),
        (499, true),
        (500, true),
        (503, true),
        (504, false),
        (505, true),
        (523, true),
        (524, false),
        (525, true),
        (599, true),
        (0, true),
        (99, true),
        (600, true),
        (999, true),
    ];
    for &(code, fails_over) in rows {
        let decision = env.run(&status(code), &facts());
        let moved = matches!(decision, FailOver { .. });
        assert_eq!(moved, fails_over, "code {code}: {decision:?}");
        if (200..300).contains(&code) {
            assert_eq!(decision, Done, "code {code}");
        }
        if !fails_over && !(200..300).contains(&code) {
            // An alternative is left (facts()), so nothing is repeated: returned as is.
            assert_eq!(decision, Return, "code {code}");
            let mut alone = facts();
            alone.alternatives_left = false;
            let expect = if env.retry.retry_on.contains(code) {
                RetrySame { attempt: 1 }
            } else {
                Return
            };
            assert_eq!(env.run(&status(code), &alone), expect, "alone, code {code}");
        }
    }
}

#[test]
fn key_faults_marked() {
    let env = Env::new();
    for code in [401, 403, 429] {
        assert_eq!(env.run(&status(code), &facts()), FOK, "{code}");
    }
    assert_eq!(env.run(&status(500), &facts()), FO);
    let quota = Outcome::Status {
        code: 402,
        error_code: None,
        error_type: Some("insufficient_quota".into()),
        message: "quota".into(),
    };
    assert_eq!(env.run(&quota, &facts()), FOK);
    assert!(is_key_fault(&Outcome::ChannelError(
        crate::routing::outcome::ChannelFault::InvalidKey
    )));
    assert!(!is_key_fault(&Outcome::Transport(TransportKind::Connect)));
}

#[test]
fn same_target_retry_only_when_no_alternative() {
    let env = Env::new();
    let mut outcome_facts = facts();
    outcome_facts.alternatives_left = false;
    assert_eq!(
        env.run(&status(503), &outcome_facts),
        RetrySame { attempt: 1 }
    );
    outcome_facts.same_target_retries = 2;
    assert_eq!(
        env.run(&status(429), &outcome_facts),
        RetrySame { attempt: 3 }
    );
    outcome_facts.same_target_retries = 3;
    assert_eq!(env.run(&status(503), &outcome_facts), Return);
    outcome_facts.same_target_retries = 0;
    // 500 fails over but is not in retry_on
    assert_eq!(env.run(&status(500), &outcome_facts), Return);
    // 504 never fails over; it is retried on the same target only when alone (R4.5)
    assert_eq!(env.run(&status(504), &facts()), Return);
    assert_eq!(
        env.run(&status(504), &outcome_facts),
        RetrySame { attempt: 1 }
    );
    assert_eq!(
        env.run(&status(524), &outcome_facts),
        RetrySame { attempt: 1 }
    );
    assert_eq!(env.run(&status(400), &outcome_facts), Return);
}

#[test]
fn mapping_applied_first() {
    let mut env = Env::new();
    env.mapping.insert(429, 503);
    env.mapping.insert(500, 400);
    // 429 → 503: still fails over, but no longer a key fault
    assert_eq!(env.run(&status(429), &facts()), FO);
    assert_eq!(env.run(&status(500), &facts()), Return);
    env.mapping.insert(502, 200);
    assert_eq!(env.run(&status(502), &facts()), Done);
}

#[test]
fn channel_skip_transport_and_stops() {
    let env = Env::new();
    let mut outcome_facts = facts();
    for c in [
        crate::routing::outcome::ChannelFault::InvalidRequest,
        crate::routing::outcome::ChannelFault::KeyHeldBack("no room".into()),
    ] {
        assert_eq!(
            env.run(&Outcome::ChannelError(c.clone()), &outcome_facts),
            FO,
            "{c}"
        );
    }
    outcome_facts.alternatives_left = false;
    assert_eq!(
        env.run(
            &Outcome::ChannelError(crate::routing::outcome::ChannelFault::KeyHeldBack(
                "channel:x".into()
            )),
            &outcome_facts
        ),
        FO
    );
    assert_eq!(
        env.run(&Outcome::SkipRetry("billing".into()), &facts()),
        Return
    );
    assert_eq!(env.run(&Outcome::ClientGone, &facts()), Return);
    assert_eq!(env.run(&Outcome::DeadlineExceeded, &facts()), Return);
    assert_eq!(
        env.run(&Outcome::LocalAdapter("x".into()), &facts()),
        Return
    );
    assert_eq!(env.run(&Outcome::Success, &facts()), Done);
    use TransportKind::*;
    for k in TransportKind::ALL {
        assert_eq!(env.run(&Outcome::Transport(k), &facts()), FO, "{k:?}");
        let expect = if matches!(k, HeaderTimeout | FirstByteTimeout | BodyTimeout) {
            Return
        } else {
            RetrySame { attempt: 1 }
        };
        assert_eq!(
            env.run(&Outcome::Transport(k), &outcome_facts),
            expect,
            "{k:?} alone"
        );
    }
}

#[test]
fn budget_and_affinity_stop() {
    let env = Env::new();
    let mut outcome_facts = facts();
    outcome_facts.attempts_left = 0;
    assert_eq!(env.run(&status(503), &outcome_facts), Return);
    assert_eq!(env.run(&status(200), &outcome_facts), Done);
    let mut facts = facts();
    facts.affinity_skip_retry = true;
    assert_eq!(
        env.run(
            &Outcome::ChannelError(crate::routing::outcome::ChannelFault::KeyHeldBack(
                "channel:x".into()
            )),
            &facts
        ),
        Return
    );
}

#[test]
fn r10_1_families_gate_replays() {
    let env = Env::new();
    use PathFamily::*;
    for (fam, key, replay) in [
        (Images, false, false),
        (Images, true, false),
        (Audio, false, false),
        (Audio, true, true),
        (Video, false, false),
        (Music, true, true),
        // A 503 generated nothing: `responses` fails over without a key too (R10.1).
        (Responses, false, true),
        (Responses, true, true),
        (Messages, false, true),
        (Custom, false, true),
    ] {
        let mut facts = facts();
        facts.family = fam;
        facts.has_idempotency_key = key;
        let decision = env.run(&status(503), &facts);
        assert_eq!(
            decision != Return,
            replay,
            "{fam:?} key={key}: {decision:?}"
        );
    }
    // An ambiguous 502 needs the key.
    for (key, replay) in [(false, false), (true, true)] {
        let mut facts = facts();
        facts.family = Responses;
        facts.has_idempotency_key = key;
        let decision = env.run(&status(502), &facts);
        assert_eq!(
            decision != Return,
            replay,
            "responses 502 key={key}: {decision:?}"
        );
    }
}

#[test]
fn image_tiers() {
    use TransportKind::*;
    let outcome = Outcome::Transport;
    // (outcome, lowest tier that replays it: 1, 2, 3; 0 = never)
    let mut rows: Vec<(Outcome, u8)> = Vec::new();
    for c in [429, 503, 529, 530, 400, 401, 403, 404, 405, 413, 415, 422] {
        rows.push((status(c), 1));
    }
    for c in [500, 501, 502, 505, 520, 524, 599] {
        rows.push((status(c), 2));
    }
    rows.push((status(504), 3));
    for k in [
        HeaderTimeout,
        FirstByteTimeout,
        BodyTimeout,
        Broken,
        EmptyBody,
        Reset,
    ] {
        rows.push((outcome(k), 3));
    }
    for k in [Connect, Dns, Tls] {
        rows.push((outcome(k), 1));
    }
    for c in [402, 408, 409, 410, 429 + 1, 301] {
        rows.push((status(c), 0));
    }
    rows.push((Outcome::ClientGone, 0));
    rows.push((Outcome::LocalAdapter("unsupported".into()), 0));
    rows.push((
        Outcome::ChannelError(crate::routing::outcome::ChannelFault::KeyHeldBack(
            "channel:no_available_key".into(),
        )),
        0,
    ));
    let mut facts = facts();
    facts.family = PathFamily::Images;
    let mut env = Env::new();
    for (o, lowest) in &rows {
        for tier in 0u8..=3 {
            env.images = images_cfg(tier >= 1, tier >= 2, tier >= 3);
            let decision = env.run(o, &facts);
            let replays = *lowest != 0 && tier >= *lowest;
            let expect = if replays { FOK } else { Return };
            assert_eq!(decision, expect, "{o:?} at tier {tier}");
        }
    }
    assert_eq!(env.run(&status(200), &facts), Done);
}

#[test]
fn image_same_key_budget() {
    let mut env = Env::new();
    let mut facts = facts();
    facts.family = PathFamily::Images;
    facts.alternatives_left = false;
    env.images = images_cfg(true, false, false);
    assert_eq!(env.run(&status(429), &facts), Return);
    env.images = images_cfg(true, true, false);
    assert_eq!(env.run(&status(502), &facts), RetrySame { attempt: 1 });
    assert_eq!(env.run(&status(429), &facts), Return);
    env.images = images_cfg(true, true, true);
    assert_eq!(env.run(&status(429), &facts), RetrySame { attempt: 1 });
    assert_eq!(
        env.run(&Outcome::Transport(TransportKind::Broken), &facts),
        RetrySame { attempt: 1 }
    );
    facts.same_target_retries = 1;
    assert_eq!(env.run(&status(502), &facts), Return);
}

#[test]
fn task_relay_rules() {
    let env = Env::new();
    let mut facts = facts();
    facts.is_task = true;
    facts.family = PathFamily::Custom;
    let rows: &[(u16, bool)] = &[
        (429, true),
        (307, true),
        (500, true),
        (502, true),
        (503, true),
        (504, false),
        (524, false),
        (530, true),
        (400, false),
        (408, false),
        (404, true),
        (418, true),
    ];
    for &(code, again) in rows {
        let decision = env.run(&status(code), &facts);
        assert_eq!(
            matches!(decision, FailOver { .. }),
            again,
            "task {code}: {decision:?}"
        );
    }
    assert_eq!(env.run(&status(201), &facts), Done);
    assert_eq!(env.run(&Outcome::LocalAdapter("x".into()), &facts), Return);
    assert_eq!(env.run(&Outcome::SkipRetry("x".into()), &facts), Return);
    facts.alternatives_left = false;
    assert_eq!(env.run(&status(500), &facts), RetrySame { attempt: 1 });
}
