//! The two retry-safety pinning tables (R10.1, R10.3; "this constraint is pinned by a test"):
//! which request paths may be replayed, and which upstream answers count as
//! pre-generation rejections at each image-failover tier. Both run through the
//! real classifier with settings loaded from YAML + env aliases, so a change to the
//! matrix, the whitelist, the defaults or the alias wiring fails here.
//! Do not loosen these tables to raise success rates.
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::*;
use crate::config::model::Config;
use crate::routing::family::{family_of_path, path_retryable, valid_idempotency_key};

fn config(env: &[(&str, &str)]) -> Config {
    let yaml = "channels:\n  a:\n    kind: openai\n    base_url: http://127.0.0.1:9\n    keys: [\"k\"]\n    models: [m]\n";
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    crate::config::load_str(yaml, Path::new("safety.yaml"), &env).unwrap()
}

fn run(cfg: &Config, outcome: &Outcome, facts: &Facts) -> Decision {
    let settings = Settings {
        routing: &cfg.routing,
        retry: &cfg.resilience.retry,
        images: &cfg.images_failover,
    };
    classify(
        &OutcomeFacts::of(outcome, &BTreeMap::new(), facts.family),
        facts,
        &settings,
    )
}

fn facts(path: &str, key: bool) -> Facts {
    Facts {
        family: family_of_path(path),
        has_idempotency_key: key,
        is_task: false,
        alternatives_left: true,
        same_target_retries: 0,
        attempts_left: 3,
        affinity_skip_retry: false,
        ..super::tests::facts()
    }
}

fn status(code: u16) -> Outcome {
    Outcome::Status {
        code,
        error_code: None,
        error_type: None,
        message: String::new(),
    }
}

/// Table 1 (R10.1): (path, replayable by default, replayable with Idempotency-Key).
const PATH_MATRIX: &[(&str, bool, bool)] = &[
    ("/v1/images/generations", false, false),
    ("/v1/images/edits", false, false),
    ("/v1/images/variations", false, false),
    ("/v1/audio/speech", false, true),
    ("/v1/audio/transcriptions", false, true),
    ("/v1/audio/translations", false, true),
    // Videos and music arrive only through `/v1/*` pass-through; still non-replayable.
    ("/v1/videos", false, true),
    ("/v1/videos/generations", false, true),
    ("/v1/videos/task_1/remix", false, true),
    ("/v1/video/submit", false, true),
    ("/v1/video/generations?async=true", false, true),
    ("/v1/music", false, true),
    ("/v1/music/generate", false, true),
    ("/v1/responses", false, true),
    ("/v1/responses/resp_1/cancel", false, true),
    ("/v1/chat/completions", true, true),
    ("/v1/completions", true, true),
    ("/v1/embeddings", true, true),
    ("/v1/moderations", true, true),
    ("/v1/messages", true, true),
    ("/v1/messages?beta=true", true, true),
    ("/v1/systemone", true, true),
    ("/v1/rerank", true, true),
    ("/v1/custom/deep/path", true, true),
];

#[test]
fn pinned_path_matrix() {
    let cfg = config(&[]);
    for &(path, plain, keyed) in PATH_MATRIX {
        assert_eq!(path_retryable(path, false), plain, "{path} default");
        assert_eq!(path_retryable(path, true), keyed, "{path} keyed");
        // The classifier agrees: an ambiguous 502 with another target left fails over iff
        // allowed (images_failover is off by default).
        for (key, expect) in [(false, plain), (true, keyed)] {
            let decision = run(&cfg, &status(502), &facts(path, key));
            assert_eq!(
                matches!(decision, Decision::FailOver { .. }),
                expect,
                "{path} key={key}: {decision:?}"
            );
        }
    }
}

/// Table 1b (R10.1): `/v1/responses` without a key fails over after a rejection
/// that generated nothing, and only then.
#[test]
fn responses_fail_over_only_on_pre_generation_rejections() {
    use TransportKind::*;
    let cfg = config(&[]);
    let rows: &[(Outcome, bool)] = &[
        (status(429), true),
        (status(503), true),
        (status(529), true),
        (Outcome::Transport(Connect), true),
        (status(500), false),
        (status(502), false),
        (Outcome::Transport(Reset), false),
        (Outcome::Transport(HeaderTimeout), false),
        (Outcome::Transport(BodyTimeout), false),
        (Outcome::Transport(Broken), false),
    ];
    for (o, plain) in rows {
        for (key, expect) in [(false, *plain), (true, true)] {
            let decision = run(&cfg, o, &facts("/v1/responses", key));
            assert_eq!(
                decision != Decision::Return,
                expect,
                "{o:?} key={key}: {decision:?}"
            );
        }
        // Messages and chat keep replaying everything they replayed.
        let decision = run(&cfg, o, &facts("/v1/messages", false));
        assert!(decision != Decision::Return, "{o:?} messages: {decision:?}");
    }
}

#[test]
fn invalid_idempotency_key_counts_as_absent() {
    // (header bytes, counts) — an ignored key reopens nothing.
    let long = "k".repeat(256);
    let rows: &[(&[u8], bool)] = &[
        (b"order-42", true),
        (&[b'x'; 255], true),
        (long.as_bytes(), false),
        (b"", false),
        (b"two words", false),
        ("ключ".as_bytes(), false),
        (b"tab\tkey", false),
    ];
    for &(v, counts) in rows {
        assert_eq!(valid_idempotency_key(v), counts, "{v:?}");
        let key = valid_idempotency_key(v);
        assert_eq!(path_retryable("/v1/responses", key), counts, "{v:?}");
    }
}

#[derive(Clone, Copy, Debug)]
enum T {
    Off,
    One,
    Ambiguous,
    Uncertain,
}

fn tier_env(tier: T) -> Vec<(&'static str, &'static str)> {
    let mut env = Vec::new();
    if !matches!(tier, T::Off) {
        env.push(("IMAGES_FAILOVER_ENABLED", "true"));
    }
    if matches!(tier, T::Ambiguous) {
        env.push(("IMAGES_FAILOVER_INCLUDE_AMBIGUOUS", "true"));
    }
    if matches!(tier, T::Uncertain) {
        env.push(("IMAGES_FAILOVER_INCLUDE_UNCERTAIN", "true"));
    }
    env
}

/// Table 2 (R10.3): outcome → replayed to another key/channel at [off, tier 1,
/// +include_ambiguous, +include_uncertain], and replayed on the same key (per-key
/// budget, nothing else left) at the same four settings.
#[allow(clippy::type_complexity)]
fn outcome_table() -> Vec<(Outcome, [bool; 4], [bool; 4])> {
    use TransportKind::*;
    let yes_t1 = [false, true, true, true];
    let same_t3 = [false, false, false, true];
    let mut rows = Vec::new();
    for c in [429, 503, 529, 530, 400, 401, 403, 404, 405, 413, 415, 422] {
        rows.push((status(c), yes_t1, same_t3));
    }
    for c in [500, 501, 502, 505, 507, 520, 524, 599] {
        rows.push((
            status(c),
            [false, false, true, true],
            [false, false, true, true],
        ));
    }
    rows.push((status(504), [false, false, false, true], same_t3));
    for k in [
        HeaderTimeout,
        FirstByteTimeout,
        BodyTimeout,
        Broken,
        Reset,
        EmptyBody,
    ] {
        rows.push((Outcome::Transport(k), [false, false, false, true], same_t3));
    }
    // Never left the gateway: a pre-generation rejection.
    for k in [Connect, Dns, Tls] {
        rows.push((Outcome::Transport(k), yes_t1, same_t3));
    }
    // Whitelist: anything not listed never replays, at any tier.
    let never = [false; 4];
    for c in [300, 301, 307, 402, 406, 408, 409, 410, 418, 429 + 2, 451] {
        rows.push((status(c), never, never));
    }
    rows.push((Outcome::ClientGone, never, never));
    rows.push((Outcome::LocalAdapter("unsupported".into()), never, never));
    rows.push((Outcome::DeadlineExceeded, never, never));
    rows.push((Outcome::SkipRetry("x".into()), never, never));
    rows.push((
        Outcome::ChannelError(crate::routing::outcome::ChannelFault::KeyHeldBack(
            "channel:no_available_key".into(),
        )),
        never,
        never,
    ));
    rows
}

#[test]
fn pinned_image_outcome_tiers() {
    let tiers = [T::Off, T::One, T::Ambiguous, T::Uncertain];
    let cfgs: Vec<Config> = tiers.iter().map(|&t| config(&tier_env(t))).collect();
    assert!(!cfgs[0].images_failover.enabled, "off by default");
    assert_eq!(cfgs[0].images_failover.key_retry_budget, 1);
    for (o, replay, same_key) in outcome_table() {
        for (i, cfg) in cfgs.iter().enumerate() {
            let mut facts = facts("/v1/images/generations", false);
            let decision = run(cfg, &o, &facts);
            // A replay always moves to the next key first (R10.3).
            let want = if replay[i] {
                Decision::FailOver { key_fault: true }
            } else {
                Decision::Return
            };
            assert_eq!(decision, want, "{o:?} at {:?}", tiers[i]);
            // The Idempotency-Key does not reopen images.
            facts.has_idempotency_key = true;
            assert_eq!(run(cfg, &o, &facts), want, "{o:?} keyed at {:?}", tiers[i]);
            // Nothing else left: the per-key budget.
            facts.alternatives_left = false;
            let want = if same_key[i] {
                Decision::RetrySame { attempt: 1 }
            } else {
                Decision::Return
            };
            assert_eq!(
                run(cfg, &o, &facts),
                want,
                "{o:?} same key at {:?}",
                tiers[i]
            );
            facts.same_target_retries = 1;
            assert_eq!(
                run(cfg, &o, &facts),
                Decision::Return,
                "{o:?} budget spent at {:?}",
                tiers[i]
            );
        }
    }
}

#[test]
fn key_retry_budget_alias_sets_the_same_key_budget() {
    let cfg = config(&[
        ("IMAGES_FAILOVER_ENABLED", "true"),
        ("IMAGES_FAILOVER_INCLUDE_UNCERTAIN", "true"),
        ("CHANNEL_RETRY_TIMES", "3"),
    ]);
    let mut facts = facts("/v1/images/generations", false);
    facts.alternatives_left = false;
    for (done, want) in [
        (0, Decision::RetrySame { attempt: 1 }),
        (2, Decision::RetrySame { attempt: 3 }),
        (3, Decision::Return),
    ] {
        facts.same_target_retries = done;
        assert_eq!(run(&cfg, &status(429), &facts), want, "after {done}");
    }
}

/// R10.4: (outcome, path) → possibly charged.
#[test]
fn possibly_charged_marks_unknown_outcomes_on_billing_paths() {
    use TransportKind::*;
    let unknown = [
        Outcome::Transport(HeaderTimeout),
        Outcome::Transport(FirstByteTimeout),
        Outcome::Transport(BodyTimeout),
        Outcome::Transport(Broken),
        Outcome::Transport(Reset),
        Outcome::Transport(EmptyBody),
        Outcome::DeadlineExceeded,
    ];
    let known = [
        Outcome::Transport(Connect),
        Outcome::Transport(Dns),
        Outcome::Transport(Tls),
        status(503),
        status(500),
        Outcome::ClientGone,
        Outcome::LocalAdapter("x".into()),
    ];
    for &(path, plain, _) in PATH_MATRIX {
        let fam = family_of_path(path);
        for o in &unknown {
            assert_eq!(possibly_charged(o, fam), !plain, "{path} {o:?}");
        }
        for o in &known {
            assert!(!possibly_charged(o, fam), "{path} {o:?}");
        }
    }
}

/// R10.5: a configured task path follows the task rule, not the family matrix.
#[test]
fn task_submission_rule_replaces_the_family_matrix() {
    let cfg = config(&[]);
    let mut facts = facts("/v1/videos", false);
    facts.is_task = true;
    for (o, again) in [
        (status(429), true),
        (status(307), true),
        (status(500), true),
        (status(503), true),
        (status(504), false),
        (status(524), false),
        (status(400), false),
        (status(408), false),
        (status(404), true),
        (Outcome::Transport(TransportKind::Connect), true),
        (Outcome::Transport(TransportKind::HeaderTimeout), false),
        (Outcome::Transport(TransportKind::BodyTimeout), false),
        (Outcome::LocalAdapter("x".into()), false),
        (Outcome::ClientGone, false),
    ] {
        let decision = run(&cfg, &o, &facts);
        assert_eq!(
            matches!(decision, Decision::FailOver { .. }),
            again,
            "{o:?}: {decision:?}"
        );
    }
    // A locked follow-up (no other target): retries stay on the same target.
    facts.alternatives_left = false;
    assert_eq!(
        run(&cfg, &status(502), &facts),
        Decision::RetrySame { attempt: 1 }
    );
    assert_eq!(run(&cfg, &status(504), &facts), Decision::Return);
}
