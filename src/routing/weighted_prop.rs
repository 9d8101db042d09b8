//! Property tests of the weighted draw (R3.2, R3.3): frequencies follow weights, zero weights
//! are standby, `weighted_order` is a permutation.
use proptest::prelude::*;

use super::weighted::{draw, effective_weights, weighted_order};

/// The order as first written: the remaining weights rebuilt before every draw.
fn reference_order(weights: &[u64], rng: &mut fastrand::Rng) -> Vec<usize> {
    let mut left: Vec<usize> = (0..weights.len()).collect();
    let mut out = Vec::new();
    while !left.is_empty() {
        let remaining: Vec<u64> = left.iter().map(|&i| weights[i]).collect();
        let Some(pick) = draw(&remaining, rng) else {
            break;
        };
        out.push(left.remove(pick));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `weighted_order` keeps its weights beside its indices instead of rebuilding them per
    /// draw: the same order from the same seed, and the same random numbers taken.
    #[test]
    fn weighted_order_draws_as_the_reference(ws in prop::collection::vec(0u64..1000, 0..12), seed: u64) {
        let (mut a, mut b) = (fastrand::Rng::with_seed(seed), fastrand::Rng::with_seed(seed));
        prop_assert_eq!(weighted_order(&ws, &mut a).to_vec(), reference_order(&ws, &mut b));
        prop_assert_eq!(a.u64(..), b.u64(..));
    }

    #[test]
    fn weighted_order_is_a_permutation(ws in prop::collection::vec(0u64..1000, 0..12), seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut order = weighted_order(&ws, &mut rng);
        order.sort_unstable();
        prop_assert_eq!(order.to_vec(), (0..ws.len()).collect::<Vec<_>>());
    }

    #[test]
    fn zero_weights_come_after_every_positive_one(ws in prop::collection::vec(0u64..5, 1..12), seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let order = weighted_order(&ws, &mut rng);
        let positives = ws.iter().filter(|&&w| w > 0).count();
        for (pos, &i) in order.iter().enumerate() {
            prop_assert_eq!(ws[i] > 0, pos < positives, "order {:?} for {:?}", order, ws);
        }
        if positives > 0 {
            let drawn = draw(&ws, &mut rng).unwrap();
            prop_assert!(ws[drawn] > 0);
        }
    }

    #[test]
    fn frequencies_follow_weights(ws in prop::collection::vec(1u64..50, 2..5), seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let draws = 20_000usize;
        let mut hits = vec![0usize; ws.len()];
        for _ in 0..draws {
            hits[draw(&ws, &mut rng).unwrap()] += 1;
        }
        let total: u64 = ws.iter().sum();
        for (i, &w) in ws.iter().enumerate() {
            let share = w as f64 / total as f64;
            let sd = (share * (1.0 - share) / draws as f64).sqrt();
            let got = hits[i] as f64 / draws as f64;
            // 6 standard deviations (plus a small floor): a real skew fails, noise does not.
            prop_assert!((got - share).abs() <= 6.0 * sd + 0.002, "{:?}: index {} got {} want {}", ws, i, got, share);
        }
    }

    #[test]
    fn effective_weights_keep_zero_as_standby(raw in prop::collection::vec(0u32..200, 1..10)) {
        let eff = effective_weights(&raw);
        prop_assert_eq!(eff.len(), raw.len());
        if raw.iter().all(|&w| w == 0) {
            prop_assert!(eff.iter().all(|&w| w == 100));
        } else {
            for (r, e) in raw.iter().zip(&eff) {
                prop_assert_eq!(*r == 0, *e == 0);
            }
        }
    }
}
