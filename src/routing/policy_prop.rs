//! Property tests of the outcome classifier (R4.4, R4.5, R10): pure, 2xx is Done, no attempt
//! after the last one, non-retryable families never replay unless image failover says so.
use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::family::{replayable, PathFamily};
use super::policy::{classify, Decision, Facts, Outcome, OutcomeFacts, Settings, TransportKind};
use crate::config::model::{ImagesFailover, Retry};

use super::policy::tests::routing;

fn retry(max: u32) -> Retry {
    Retry {
        max_retries: max,
        ..super::policy::tests::retry()
    }
}

const FAMILIES: &[PathFamily] = &[
    PathFamily::Chat,
    PathFamily::Completions,
    PathFamily::Embeddings,
    PathFamily::Moderations,
    PathFamily::Messages,
    PathFamily::Responses,
    PathFamily::Images,
    PathFamily::Audio,
    PathFamily::Video,
    PathFamily::Music,
    PathFamily::Models,
    PathFamily::Custom,
    PathFamily::CustomWrite,
    PathFamily::TokenCount,
];

fn outcome() -> impl Strategy<Value = Outcome> {
    let marker = prop::sample::select(vec![
        None,
        Some("invalid_api_key".to_string()),
        Some("x".to_string()),
    ]);
    prop_oneof![
        Just(Outcome::Success),
        (0u16..1000, marker.clone(), marker).prop_map(|(code, error_code, error_type)| {
            Outcome::Status {
                code,
                error_code,
                error_type,
                message: String::new(),
            }
        }),
        prop::sample::select(TransportKind::ALL.to_vec()).prop_map(Outcome::Transport),
        Just(Outcome::ChannelError(
            crate::routing::outcome::ChannelFault::KeyHeldBack("channel:no_available_key".into())
        )),
        Just(Outcome::SkipRetry("x".into())),
        Just(Outcome::ClientGone),
        Just(Outcome::LocalAdapter("x".into())),
        Just(Outcome::DeadlineExceeded),
    ]
}

fn facts() -> impl Strategy<Value = Facts> {
    (
        prop::sample::select(FAMILIES.to_vec()),
        any::<[bool; 6]>(),
        0u32..5,
        0u32..4,
        (0u64..3, 0u64..3),
    )
        .prop_map(
            |(family, b, same_target_retries, attempts_left, (left, wait))| Facts {
                family,
                has_idempotency_key: b[0],
                is_task: b[1],
                alternatives_left: b[2],
                same_target_retries,
                attempts_left,
                affinity_skip_retry: b[3],
                breaker_admitted: b[4],
                time_left: Duration::from_secs(left),
                retry_backoff: Duration::from_secs(wait),
                retry_budget: b[5],
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn classifier_properties(o in outcome(), f in facts(), images_on: bool, max in 0u32..4,
                             map in prop::option::of((400u16..600, 200u16..600))) {
        let routing = routing();
        let retry = retry(max);
        let images = ImagesFailover { enabled: images_on, include_ambiguous: true, include_uncertain: true, key_retry_budget: 1 };
        let mut mapping = BTreeMap::new();
        if let Some((from, to)) = map {
            mapping.insert(from, to);
        }
        let settings = Settings { routing: &routing, retry: &retry, images: &images };
        let facts = OutcomeFacts::of(&o, &mapping, f.family);
        let decision = classify(&facts, &f, &settings);
        // Pure: the same inputs give the same decision.
        prop_assert_eq!(decision, classify(&OutcomeFacts::of(&o.clone(), &mapping, f.family), &f, &settings));
        // 2xx (after mapping) is always Done.
        if let Outcome::Status { code, .. } = &o {
            let mapped = mapping.get(code).copied().unwrap_or(*code);
            if (200..300).contains(&mapped) {
                prop_assert_eq!(decision, Decision::Done);
            }
        }
        if o == Outcome::Success {
            prop_assert_eq!(decision, Decision::Done);
        }
        let moves = matches!(decision, Decision::FailOver { .. } | Decision::RetrySame { .. });
        // No attempt after the last one.
        if f.attempts_left == 0 {
            prop_assert!(!moves, "{:?}", decision);
        }
        // A non-retryable family never replays unless image failover is on for images, or the
        // path is a configured task relay (the task rule of R10.5 decides those).
        let image_replay = f.family == PathFamily::Images && images_on;
        if !replayable(f.family, f.has_idempotency_key, &facts.outcome) && !image_replay && !f.is_task {
            prop_assert!(!moves, "{:?} {:?} {:?}", o, f, decision);
        }
        // Same-target retries respect the budget.
        if let Decision::RetrySame { attempt } = decision {
            prop_assert!(attempt >= 1);
            prop_assert!(f.same_target_retries < max.max(1) || f.is_task);
            // ... and the request's limits (R6.1, R4.7).
            prop_assert!(f.breaker_admitted && f.retry_backoff < f.time_left);
        }
        // Nothing is retried past the retry budget (R4.9), and only a retry can run out of it.
        if !f.retry_budget {
            prop_assert!(!decision.retries(&f), "{:?}", decision);
        } else {
            prop_assert!(decision != Decision::OutOfBudget);
        }
        // Only a same-target retry can outlast the deadline.
        if decision == Decision::OutOfTime {
            prop_assert!(f.retry_backoff >= f.time_left && f.breaker_admitted);
        }
    }
}
