//! Weighted random draw within one priority tier (R3.2, R3.3; new-api's rules).
//!
//! Weight rules: a tier whose weights are all 0 counts each channel as 100
//! (equal share); a tier whose mean weight is below 10 is scaled by 100 so
//! small weights still separate; otherwise weights are used as configured.
//! A 0 weight among non-zero ones stays 0: that channel is never drawn while
//! a positive-weight channel remains, and is drawn (uniformly among the
//! zero-weight rest) only once every positive-weight channel has been used
//! up by [`weighted_order`]. This keeps "weight 0 = standby" meaningful.

use smallvec::SmallVec;

/// An order of a tier's candidates: inline up to 8 (a tier rarely has more), no allocation.
pub type Order = SmallVec<[usize; 8]>;

/// Effective draw weights for one tier (R3.3).
pub fn effective_weights(raw: &[u32]) -> Vec<u64> {
    if raw.is_empty() {
        return Vec::new();
    }
    let sum: u64 = raw.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 {
        return vec![100; raw.len()];
    }
    // mean < 10  <=>  sum < 10 * len (integer arithmetic, no rounding).
    let scale = if sum < 10 * raw.len() as u64 { 100 } else { 1 };
    raw.iter().map(|&w| u64::from(w) * scale).collect()
}

/// Draw one index in proportion to `weights`. If every weight is 0 the draw
/// is uniform; `None` only for an empty slice.
pub fn draw(weights: &[u64], rng: &mut fastrand::Rng) -> Option<usize> {
    if weights.is_empty() {
        return None;
    }
    let total: u64 = weights.iter().fold(0u64, |a, &w| a.saturating_add(w));
    if total == 0 {
        return Some(rng.usize(..weights.len()));
    }
    let mut point = rng.u64(..total);
    for (i, &w) in weights.iter().enumerate() {
        if point < w {
            return Some(i);
        }
        point -= w;
    }
    // Only reachable if the sum saturated; fall back to the last positive weight.
    weights.iter().rposition(|&w| w > 0)
}

/// A weighted random permutation of `0..weights.len()` (draw without replacement).
pub fn weighted_order(weights: &[u64], rng: &mut fastrand::Rng) -> Order {
    if weights.len() == 1 {
        // One candidate: the one draw (the random number is still taken, as below).
        let _ = draw(weights, rng);
        return smallvec::smallvec![0];
    }
    // The indices not drawn yet and their weights, side by side: each draw removes one of
    // each (inline up to 8 candidates: no allocation).
    let mut left: Order = (0..weights.len()).collect();
    let mut remaining: SmallVec<[u64; 8]> = SmallVec::from_slice(weights);
    let mut out = Order::with_capacity(weights.len());
    while !left.is_empty() {
        let Some(pick) = draw(&remaining, rng) else {
            break;
        };
        remaining.remove(pick);
        out.push(left.remove(pick));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(weights: &[u64], n: usize, seed: u64) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut counts = vec![0usize; weights.len()];
        for _ in 0..n {
            counts[draw(weights, &mut rng).unwrap()] += 1;
        }
        counts.iter().map(|&c| c as f64 / n as f64).collect()
    }

    #[test]
    fn effective_weight_rules() {
        assert_eq!(effective_weights(&[0, 0, 0]), vec![100, 100, 100]);
        assert_eq!(effective_weights(&[1, 3]), vec![100, 300]);
        assert_eq!(effective_weights(&[70, 30]), vec![70, 30]);
        // mean exactly 10 is not scaled
        assert_eq!(effective_weights(&[10, 10]), vec![10, 10]);
        assert_eq!(effective_weights(&[9, 10]), vec![900, 1000]);
        // zero among non-zero stays zero (scaled or not)
        assert_eq!(effective_weights(&[0, 5]), vec![0, 500]);
        assert_eq!(effective_weights(&[0, 50]), vec![0, 50]);
        assert!(effective_weights(&[]).is_empty());
    }

    #[test]
    fn seventy_thirty_split() {
        let s = shares(&effective_weights(&[70, 30]), 5000, 7);
        assert!((s[0] - 0.70).abs() < 0.03, "{s:?}");
        assert!((s[1] - 0.30).abs() < 0.03, "{s:?}");
    }

    #[test]
    fn all_zero_equal_split() {
        let s = shares(&effective_weights(&[0, 0]), 4000, 11);
        assert!((s[0] - 0.5).abs() < 0.03, "{s:?}");
    }

    #[test]
    fn small_weights_separate() {
        let s = shares(&effective_weights(&[1, 3]), 4000, 13);
        assert!((s[0] - 0.25).abs() < 0.03, "{s:?}");
        assert!((s[1] - 0.75).abs() < 0.03, "{s:?}");
    }

    #[test]
    fn zero_weight_never_drawn_among_positive() {
        let s = shares(&effective_weights(&[0, 50]), 2000, 3);
        assert_eq!(s[0], 0.0);
        assert_eq!(draw(&[], &mut fastrand::Rng::with_seed(1)), None);
    }

    #[test]
    fn order_is_a_permutation_weighted_first() {
        let w = effective_weights(&[90, 10, 0]);
        let mut rng = fastrand::Rng::with_seed(5);
        let mut first0 = 0;
        for _ in 0..2000 {
            let o = weighted_order(&w, &mut rng);
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(sorted.as_slice(), [0, 1, 2]);
            // the zero-weight standby always comes last
            assert_eq!(o[2], 2);
            if o[0] == 0 {
                first0 += 1;
            }
        }
        let share = first0 as f64 / 2000.0;
        assert!((share - 0.9).abs() < 0.03, "{share}");
    }
}
