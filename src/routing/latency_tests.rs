//! `routing::latency`: the moving score and the power-of-two-choices order (R19.1), with a
//! seeded RNG.
use super::*;

fn scored(latency: f64) -> Option<Score> {
    let mut score = Score::NEW;
    score.observe(Some(latency));
    Some(score)
}

/// How often each index goes first over `n` orders.
fn firsts(weights: &[u64], scores: &[Option<Score>], rounds: usize) -> Vec<usize> {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut counts = vec![0; weights.len()];
    for _ in 0..rounds {
        counts[p2c_order(weights, scores, &mut rng)[0]] += 1;
    }
    counts
}

#[test]
fn moving_latency_and_error_rate() {
    let mut score = Score::NEW;
    score.observe(Some(0.1));
    assert_eq!(score.latency, Some(0.1));
    assert_eq!(score.error_rate, 0.0);
    score.observe(Some(0.4));
    assert!((score.latency.unwrap() - 0.19).abs() < 1e-9, "{score:?}");
    let before = score;
    score.observe(None);
    assert_eq!(
        score.latency, before.latency,
        "a fault is no latency sample"
    );
    assert!((score.error_rate - ALPHA).abs() < 1e-9);
    assert!(score.cost(0.0) > before.cost(0.0) * 3.0);
    assert_eq!(score.samples, 3);
    // Errors only: the neutral latency, penalised.
    let mut failing_score = Score::NEW;
    failing_score.observe(None);
    assert_eq!(failing_score.error_rate, 1.0);
    assert!((failing_score.cost(0.2) - 0.201 * 10.0).abs() < 1e-9);
}

#[test]
fn the_faster_channel_goes_first_and_the_slower_keeps_a_small_share() {
    let counts = firsts(&[100, 100], &[scored(0.01), scored(0.31)], 10_000);
    let slow = counts[1] as f64 / 10_000.0;
    assert!((slow - EXPLORE).abs() < 0.02, "{counts:?}");
    // Every order holds every candidate once.
    let mut rng = fastrand::Rng::with_seed(1);
    let mut order = p2c_order(
        &[1, 2, 3, 4],
        &[None, scored(0.1), None, scored(0.2)],
        &mut rng,
    );
    order.sort();
    assert_eq!(order, vec![0, 1, 2, 3]);
}

#[test]
fn unscored_candidates_are_neutral_and_weights_are_priors() {
    // Nothing scored, equal weights: a coin.
    let counts = firsts(&[100, 100], &[None, None], 8_000);
    assert!((3_600..4_400).contains(&counts[0]), "{counts:?}");
    // Nothing scored: at equal cost the heavier prior wins (the lighter keeps the
    // exploring share).
    let counts = firsts(&[300, 100], &[None, None], 8_000);
    assert!((7_000..7_400).contains(&counts[0]), "{counts:?}");
    // One scored, one not: the unscored costs the scored one's latency, a tie that the
    // first drawn wins — the weights again.
    let counts = firsts(&[100, 100], &[scored(0.5), None], 8_000);
    assert!((3_600..4_400).contains(&counts[0]), "{counts:?}");
    // Three times the weight outweighs twice the latency.
    let counts = firsts(&[300, 100], &[scored(0.2), scored(0.1)], 8_000);
    assert!(counts[0] > 6_800, "{counts:?}");
    // Errors outweigh speed.
    let mut failing = Score::NEW;
    failing.observe(Some(0.01));
    failing.observe(None);
    failing.observe(None);
    let counts = firsts(&[100, 100], &[Some(failing), scored(0.05)], 8_000);
    assert!(counts[1] > 6_800, "{counts:?}");
}

#[test]
fn weight_zero_stays_standby() {
    let mut rng = fastrand::Rng::with_seed(3);
    for _ in 0..500 {
        let order = p2c_order(
            &[0, 100, 100],
            &[scored(0.001), scored(1.0), scored(2.0)],
            &mut rng,
        );
        assert_eq!(order[2], 0, "{order:?}");
    }
    // A tier of standbys only is still ordered.
    let order = p2c_order(&[0, 0], &[None, None], &mut rng);
    assert_eq!(order.len(), 2);
}

#[test]
fn a_channel_that_becomes_slow_loses_first_place_within_two_samples() {
    let (mut fast, slow) = (scored(0.005).unwrap(), scored(0.305).unwrap());
    let first = |a: Score, b: Score| firsts(&[100, 100], &[Some(a), Some(b)], 2_000)[0];
    assert!(first(fast, slow) > 1_600);
    fast.observe(Some(0.905));
    fast.observe(Some(0.905));
    assert!(first(fast, slow) < 400, "{fast:?}");
}
