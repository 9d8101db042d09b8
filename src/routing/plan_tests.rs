//! Tests for the attempt plan (R4.1–R4.3, R4.8, R5).
use std::cell::Cell;

use super::*;
use crate::routing::table::{Tier, TierTarget};

const FO: Decision = Decision::FailOver { key_fault: false };
const FOK: Decision = Decision::FailOver { key_fault: true };

/// tiers: highest first; each (channel, weight).
fn route(tiers: &[&[(ChannelId, u64)]]) -> Route {
    Route {
        tiers: tiers
            .iter()
            .enumerate()
            .map(|(i, t)| Tier {
                priority: 100 - i as i64,
                candidates: t
                    .iter()
                    .map(|&(channel, weight)| TierTarget {
                        channel,
                        upstream_model: format!("m{channel}").into(),
                        weight,
                    })
                    .collect(),
            })
            .collect(),
        stream_resume: None,
    }
}

fn one(_: ChannelId) -> usize {
    1
}
fn zero(_: ChannelId) -> usize {
    0
}
fn yes(_: ChannelId, _: &str) -> bool {
    true
}

fn input<'a>(
    groups: &'a [(&'a str, &'a Route)],
    walk: TierWalk,
    retry_times: u32,
) -> PlanInput<'a> {
    PlanInput {
        groups,
        tier_walk: walk,
        retry_times,
        cross_group_retry: false,
        key_count: &one,
        key_cursor: &zero,
        available: &yes,
        preferred: None,
        weight_scale: None,
        native: None,
        score: None,
    }
}

/// Drive a plan, answering every step with `d`; returns (group, channel, key) per step.
fn run(plan: &mut AttemptPlan, decision: Decision) -> Vec<(usize, ChannelId, usize)> {
    let mut out = Vec::new();
    let mut last = None;
    while let Some(step) = plan.next(last.as_ref()) {
        out.push((step.group, step.channel, step.key_index));
        last = Some(decision);
        assert!(out.len() < 100);
    }
    out
}

fn channels(steps: &[(usize, ChannelId, usize)]) -> Vec<ChannelId> {
    steps.iter().map(|s| s.1).collect()
}

#[test]
fn one_per_tier_walk_table() {
    // A=0 (100, w50), B=1 (100, w30), C=2 (50, w80), D=3 (10, w20), E=4 (10, w10)
    let route = route(&[&[(0, 50), (1, 30)], &[(2, 80)], &[(3, 20), (4, 10)]]);
    let groups = [("g", &route)];
    for seed in 0..50 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut plan = AttemptPlan::new(&input(&groups, TierWalk::OnePerTier, 5), &mut rng);
        let got = channels(&run(&mut plan, FO));
        assert_eq!(got.len(), 6);
        assert!([0, 1].contains(&got[0]), "{got:?}");
        assert_eq!(got[1], 2);
        for &c in &got[2..] {
            assert!([3, 4].contains(&c), "{got:?}");
        }
    }
}

#[test]
fn retry_times_caps_steps() {
    let route = route(&[&[(0, 1), (1, 1), (2, 1), (3, 1)]]);
    let groups = [("g", &route)];
    let mut rng = fastrand::Rng::with_seed(1);
    let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 2), &mut rng);
    assert_eq!(run(&mut plan, FO).len(), 3);
    assert_eq!(plan.attempts_made(), 3);
    assert_eq!(plan.attempts_left(), 0);
    let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 0), &mut rng);
    assert_eq!(run(&mut plan, FO).len(), 1);
}

#[test]
fn same_tier_channels_back_each_other_up() {
    // three same-tier channels + one lower-tier channel, retry_times 5
    let route = route(&[&[(0, 10), (1, 10), (2, 10)], &[(3, 10)]]);
    let groups = [("g", &route)];
    for seed in 0..20 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 5), &mut rng);
        let got = channels(&run(&mut plan, FO));
        let mut first3 = got[..3].to_vec();
        first3.sort_unstable();
        assert_eq!(first3, vec![0, 1, 2]);
        assert_eq!(got[3..], [3]);

        let mut plan = AttemptPlan::new(&input(&groups, TierWalk::OnePerTier, 5), &mut rng);
        let got = channels(&run(&mut plan, FO));
        assert_eq!(got.len(), 6);
        assert!(got[0] < 3);
        assert!(got[1..].iter().all(|&c| c == 3), "{got:?}");
    }
}

#[test]
fn cross_group_walk_restarts_at_the_top_tier() {
    let route_a = route(&[&[(0, 1)], &[(1, 1)]]);
    let route_b = route(&[&[(2, 1)], &[(3, 1)]]);
    let groups = [("A", &route_a), ("B", &route_b)];
    for walk in [TierWalk::OnePerTier, TierWalk::Exhaust] {
        let mut rng = fastrand::Rng::with_seed(2);
        let mut plan_input = input(&groups, walk, 3);
        plan_input.cross_group_retry = true;
        let mut plan = AttemptPlan::new(&plan_input, &mut rng);
        let got: Vec<(usize, ChannelId)> = run(&mut plan, FO).iter().map(|s| (s.0, s.1)).collect();
        assert_eq!(got, vec![(0, 0), (0, 1), (1, 2), (1, 3)], "{walk:?}");
        // without cross_group_retry only group A is used
        plan_input.cross_group_retry = false;
        let mut plan = AttemptPlan::new(&plan_input, &mut rng);
        let got = run(&mut plan, FO);
        assert!(got.iter().all(|s| s.0 == 0), "{walk:?} {got:?}");
    }
}

#[test]
fn auto_groups_skip_empty_first_group() {
    let empty = Route::default();
    let route_b = route(&[&[(5, 1)]]);
    let groups = [("A", &empty), ("B", &route_b)];
    let mut rng = fastrand::Rng::with_seed(2);
    let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 3), &mut rng);
    assert_eq!(run(&mut plan, FO), vec![(1, 5, 0)]);
}

#[test]
fn multi_key_key_fault_rotates_keys_first() {
    let route = route(&[&[(0, 1)], &[(1, 1)]]);
    let groups = [("g", &route)];
    let three = |c: ChannelId| if c == 0 { 3 } else { 1 };
    let cursor = |c: ChannelId| if c == 0 { 2 } else { 0 };
    let mut plan_input = input(&groups, TierWalk::Exhaust, 10);
    plan_input.key_count = &three;
    plan_input.key_cursor = &cursor;
    let mut rng = fastrand::Rng::with_seed(1);
    let mut plan = AttemptPlan::new(&plan_input, &mut rng);
    assert_eq!(
        run(&mut plan, FOK),
        vec![(0, 0, 2), (0, 0, 0), (0, 0, 1), (0, 1, 0)]
    );
    // a non-key fault moves to the next channel at once
    let mut plan = AttemptPlan::new(&plan_input, &mut rng);
    let s1 = plan.next(None).unwrap();
    assert_eq!((s1.channel, s1.key_index), (0, 2));
    let s2 = plan.next(Some(&FO)).unwrap();
    assert_eq!(s2.channel, 1);
    // earlier channels are not revisited: channel 1 has one key, nothing is left
    assert!(!plan.alternatives_left());
    assert_eq!(plan.next(Some(&FO)), None);
}

#[test]
fn last_channel_other_keys_count_as_alternatives() {
    let route = route(&[&[(0, 1)]]);
    let groups = [("g", &route)];
    let two = |_: ChannelId| 2;
    let mut plan_input = input(&groups, TierWalk::Exhaust, 5);
    plan_input.key_count = &two;
    let mut rng = fastrand::Rng::with_seed(1);
    let mut plan = AttemptPlan::new(&plan_input, &mut rng);
    assert_eq!(plan.next(None).unwrap().key_index, 0);
    assert!(plan.alternatives_left());
    assert_eq!(plan.next(Some(&FO)).unwrap().key_index, 1);
    assert!(!plan.alternatives_left());
    assert_eq!(plan.next(Some(&FOK)), None);
}

#[test]
fn stale_channel_in_one_per_tier_never_repeats_a_key() {
    let route = route(&[&[(0, 1)]]);
    let groups = [("g", &route)];
    let two = |_: ChannelId| 2;
    let mut plan_input = input(&groups, TierWalk::OnePerTier, 3);
    plan_input.key_count = &two;
    let mut rng = fastrand::Rng::with_seed(1);
    let mut plan = AttemptPlan::new(&plan_input, &mut rng);
    let keys: Vec<usize> = run(&mut plan, FO).iter().map(|s| s.2).collect();
    assert_eq!(keys, vec![0, 1, 0, 1]);
}

#[test]
fn retry_same_repeats_target() {
    let route = route(&[&[(0, 1)], &[(1, 1)]]);
    let groups = [("g", &route)];
    let mut rng = fastrand::Rng::with_seed(1);
    let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 3), &mut rng);
    let step = plan.next(None).unwrap();
    assert_eq!(step.same_target_retry, 0);
    let s2 = plan
        .next(Some(&Decision::RetrySame { attempt: 1 }))
        .unwrap();
    assert_eq!((s2.channel, s2.key_index, s2.same_target_retry), (0, 0, 1));
    assert_eq!(plan.same_target_retries(), 1);
    let s3 = plan.next(Some(&FO)).unwrap();
    assert_eq!((s3.channel, s3.same_target_retry), (1, 0));
    assert!(!plan.alternatives_left());
    let s4 = plan
        .next(Some(&Decision::RetrySame { attempt: 1 }))
        .unwrap();
    assert_eq!(s4.channel, 1);
    assert_eq!(plan.next(Some(&Decision::RetrySame { attempt: 2 })), None);
    assert_eq!(plan.attempts_made(), 4);
}

#[test]
fn done_and_return_end_the_plan() {
    let route = route(&[&[(0, 1), (1, 1)]]);
    let groups = [("g", &route)];
    let mut rng = fastrand::Rng::with_seed(1);
    for d in [Decision::Done, Decision::Return] {
        let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 3), &mut rng);
        assert!(plan.next(None).is_some());
        assert_eq!(plan.next(Some(&d)), None);
        assert_eq!(plan.next(Some(&FO)), None);
        assert!(!plan.alternatives_left());
    }
}

#[test]
fn r4_8_availability_evaluated_once() {
    let route = route(&[&[(0, 1), (1, 1), (2, 1)]]);
    let groups = [("g", &route)];
    let calls = Cell::new(0);
    let down = Cell::new(1usize);
    let avail = |c: ChannelId, _: &str| {
        calls.set(calls.get() + 1);
        c != down.get()
    };
    let mut plan_input = input(&groups, TierWalk::Exhaust, 5);
    plan_input.available = &avail;
    let mut rng = fastrand::Rng::with_seed(4);
    let mut plan = AttemptPlan::new(&plan_input, &mut rng);
    let planned: Vec<ChannelId> = plan.upcoming().iter().map(|t| t.channel).collect();
    assert!(!planned.contains(&1));
    assert!(!plan.all_unavailable());
    let before = calls.get();
    // channel 1 comes back and channel 0 goes down mid-request
    down.set(0);
    let got = channels(&run(&mut plan, FO));
    assert_eq!(got, planned);
    assert_eq!(calls.get(), before, "availability is not consulted again");
}

#[test]
fn all_unavailable_falls_back_to_every_candidate() {
    let route = route(&[&[(0, 1)], &[(1, 1)]]);
    let groups = [("g", &route)];
    let none = |_: ChannelId, _: &str| false;
    let mut plan_input = input(&groups, TierWalk::Exhaust, 3);
    plan_input.available = &none;
    let mut rng = fastrand::Rng::with_seed(4);
    let mut plan = AttemptPlan::new(&plan_input, &mut rng);
    assert!(plan.all_unavailable());
    assert_eq!(channels(&run(&mut plan, FO)), vec![0, 1]);
    let empty = Route::default();
    let groups = [("g", &empty)];
    let plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 3), &mut rng);
    assert!(plan.is_empty() && !plan.all_unavailable() && !plan.alternatives_left());
}

#[test]
fn upcoming_lists_without_consuming() {
    let route = route(&[&[(0, 70), (1, 30)], &[(2, 1)]]);
    let groups = [("g", &route)];
    let mut rng = fastrand::Rng::with_seed(8);
    let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 3), &mut rng);
    assert_eq!(plan.upcoming().len(), 3);
    assert_eq!(plan.upcoming(), plan.targets());
    let first = plan.upcoming()[0].clone();
    let step = plan.next(None).unwrap();
    assert_eq!(step.channel, first.channel);
    assert_eq!(step.upstream_model, first.upstream_model);
    assert_eq!(plan.upcoming().len(), 2);
    assert_eq!(plan.upcoming()[1].channel, 2);
}

#[test]
fn exhaust_first_pick_follows_weights() {
    let route = route(&[&[(0, 70), (1, 30)]]);
    let groups = [("g", &route)];
    let mut rng = fastrand::Rng::with_seed(21);
    let rounds = 4000;
    let firsts = (0..rounds)
        .filter(|_| {
            let plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 1), &mut rng);
            plan.targets()[0].channel == 0
        })
        .count();
    let share = firsts as f64 / rounds as f64;
    assert!((share - 0.7).abs() < 0.03, "{share}");
}

#[test]
fn r8_3_preferred_channel_goes_first_once() {
    let route = route(&[&[(0, 1), (1, 1)], &[(2, 1)]]);
    let groups = [("g", &route)];
    for walk in [TierWalk::Exhaust, TierWalk::OnePerTier] {
        for seed in 0..20 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut inp = input(&groups, walk, 2);
            inp.preferred = Some(2);
            let plan = AttemptPlan::new(&inp, &mut rng);
            let ch: Vec<ChannelId> = plan.targets().iter().map(|t| t.channel).collect();
            assert_eq!(ch[0], 2, "{walk:?} {ch:?}");
            assert_eq!(plan.targets()[0].upstream_model.as_ref(), "m2");
            assert_eq!(ch.len(), 3, "{walk:?} {ch:?}");
            if walk == TierWalk::Exhaust {
                assert_eq!(ch.iter().filter(|&&c| c == 2).count(), 1, "{ch:?}");
            }
        }
    }
}

#[test]
fn r8_3_preferred_outside_the_candidates_is_ignored() {
    let route = route(&[&[(0, 1), (1, 1)]]);
    let groups = [("g", &route)];
    let mut rng = fastrand::Rng::with_seed(3);
    let mut inp = input(&groups, TierWalk::Exhaust, 5);
    inp.preferred = Some(7);
    let plan = AttemptPlan::new(&inp, &mut rng);
    let mut ch: Vec<ChannelId> = plan.targets().iter().map(|t| t.channel).collect();
    ch.sort();
    assert_eq!(ch, vec![0, 1]);
}

/// R15.3 `routing.balance: capacity`: a candidate whose keys have little budget left is
/// drawn in proportion to what remains (a spent one keeps weight 1: last, not gone).
#[test]
fn capacity_scales_weights_by_remaining_budget() {
    let route = route(&[&[(0, 100), (1, 100)]]);
    let groups = [("g", &route)];
    let scale = |id: ChannelId| if id == 0 { 0.0 } else { 0.5 };
    let mut first_is_1 = 0;
    for seed in 0..400 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut inp = input(&groups, TierWalk::Exhaust, 3);
        inp.weight_scale = Some(&scale);
        let mut plan = AttemptPlan::new(&inp, &mut rng);
        let got = channels(&run(&mut plan, FO));
        assert_eq!(
            got.len(),
            2,
            "the spent candidate stays in the plan: {got:?}"
        );
        first_is_1 += usize::from(got[0] == 1);
    }
    // Weights 1 vs 50: channel 1 first in ~98% of draws.
    assert!(first_is_1 > 370, "{first_is_1}");
    // Without scaling the configured weights are equal.
    let mut first_is_1 = 0;
    for seed in 0..400 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 3), &mut rng);
        first_is_1 += usize::from(channels(&run(&mut plan, FO))[0] == 1);
    }
    assert!((120..280).contains(&first_is_1), "{first_is_1}");
}

/// R16.3: within a tier, the candidates that serve the request as it is come
/// before those that would translate it, whatever the weights; tiers keep their order.
#[test]
fn native_candidates_come_first_within_their_tier() {
    // tier 1: 0 (translated, heavy), 1 (native, light); tier 2: 2 (native)
    let route = route(&[&[(0, 1000), (1, 1)], &[(2, 10)]]);
    let groups = [("g", &route)];
    let native = |c: ChannelId| c != 0;
    for seed in 0..20 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut inp = input(&groups, TierWalk::Exhaust, 5);
        inp.native = Some(&native);
        let mut plan = AttemptPlan::new(&inp, &mut rng);
        assert_eq!(channels(&run(&mut plan, FO)), vec![1, 0, 2]);
    }
}

/// A skipped target gives its attempt back: with `retry_times: 0` (one attempt), a skip
/// of the first target still lets the second be tried; its other keys are not walked.
#[test]
fn a_skipped_target_does_not_use_up_an_attempt_or_its_keys() {
    let route = route(&[&[(0, 1)], &[(1, 1)], &[(2, 1)]]);
    let groups = [("g", &route)];
    let three = |_: ChannelId| 3;
    let mut rng = fastrand::Rng::with_seed(3);
    let mut inp = input(&groups, TierWalk::Exhaust, 0);
    inp.key_count = &three;
    let mut plan = AttemptPlan::new(&inp, &mut rng);
    let first = plan.next(None).map(|s| s.channel);
    assert_eq!(first, Some(0));
    plan.skip_current();
    assert!(plan.alternatives_left());
    let second = plan.next(Some(&FO)).map(|s| s.channel);
    assert_eq!(second, Some(1));
    // An ordinary failure uses the one attempt up: channel 2 is never tried.
    assert_eq!(plan.attempts_left(), 0);
    assert_eq!(plan.next(Some(&FO)), None);
}

/// R19.3: a hedged target leaves the plan (it had its attempt) and the first target past
/// the cap takes its place.
#[test]
fn a_hedged_target_leaves_the_plan() {
    let route = route(&[&[(0, 100)], &[(1, 100)], &[(2, 100)], &[(3, 100)]]);
    let groups = [("default", &route)];
    let mut rng = fastrand::Rng::with_seed(1);
    let mut plan = AttemptPlan::new(&input(&groups, TierWalk::Exhaust, 2), &mut rng);
    assert_eq!(plan.next(None).map(|s| s.channel), Some(0));
    assert!(
        !plan.take_upcoming(0, "m0"),
        "the current target is not upcoming"
    );
    assert!(plan.take_upcoming(1, "m1"));
    assert!(!plan.take_upcoming(1, "m1"));
    let rest: Vec<ChannelId> = plan.upcoming().iter().map(|t| t.channel).collect();
    assert_eq!(rest, vec![2, 3], "the spare target joined");
}
