//! `routing.balance: latency` (R19.1): power of two choices within a tier over each
//! candidate's moving latency and error score, the configured weights as priors.
//!
//! Each position of a tier's order is filled by drawing two distinct candidates by weight
//! and taking the cheaper, where a candidate's cost is its moving latency (or, unscored, the
//! mean of the pair's scored latencies: neutral) times its error penalty, divided by its
//! weight relative to the tier's mean (a channel of twice the weight may be twice as slow).
//! With probability [`EXPLORE`] the dearer of the two is taken instead, so a slower channel
//! keeps a small share and its score stays current. Weight-0 candidates stay standby: they
//! are ordered after every positive-weight one, as in the weighted draw (R3.3).

use super::weighted::draw;

/// The chance that the dearer candidate of a drawn pair goes first anyway.
pub const EXPLORE: f64 = 0.1;
/// The weight of the newest sample in the moving averages.
pub const ALPHA: f64 = 0.3;
/// How much a moving error rate of 1 multiplies the latency (a channel that always fails
/// costs ten times its latency).
pub const ERROR_PENALTY: f64 = 9.0;

/// One (channel, upstream model)'s moving averages.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Score {
    /// Seconds to the first byte (streams) or the answer (non-stream); `None` until the
    /// first success.
    pub latency: Option<f64>,
    /// 0 ..= 1, over successes and upstream faults.
    pub error_rate: f64,
    /// Outcomes seen.
    pub samples: u64,
}

impl Score {
    /// No outcome seen yet.
    pub const NEW: Score = Score {
        latency: None,
        error_rate: 0.0,
        samples: 0,
    };

    /// Lower is better: the latency (`neutral` without one yet; plus 1 ms, so errors count
    /// at any latency) times the error penalty.
    pub fn cost(&self, neutral: f64) -> f64 {
        let lat = self.latency.unwrap_or(neutral).max(0.0) + 0.001;
        lat * (1.0 + ERROR_PENALTY * self.error_rate.clamp(0.0, 1.0))
    }

    /// One outcome: a success taking `latency`, or (`None`) an upstream fault.
    pub fn observe(&mut self, latency: Option<f64>) {
        let error = if latency.is_some() { 0.0 } else { 1.0 };
        self.error_rate = match self.samples {
            0 => error,
            _ => self.error_rate + ALPHA * (error - self.error_rate),
        };
        if let Some(l) = latency {
            self.latency = Some(match self.latency {
                None => l,
                Some(m) => m + ALPHA * (l - m),
            });
        }
        self.samples = self.samples.saturating_add(1);
    }
}

/// A tier's order (indexes into `weights` / `scores`) by power of two choices (module doc).
pub fn p2c_order(weights: &[u64], scores: &[Option<Score>], rng: &mut fastrand::Rng) -> Vec<usize> {
    let mut left: Vec<usize> = (0..weights.len()).collect();
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let positive: Vec<usize> = left.iter().copied().filter(|&i| weights[i] > 0).collect();
        let pool = if positive.is_empty() {
            left.clone()
        } else {
            positive
        };
        let pick = choose(&pool, weights, scores, rng);
        left.retain(|&i| i != pick);
        out.push(pick);
    }
    out
}

/// One position: the cheaper of two drawn by weight (the dearer with probability EXPLORE).
fn choose(
    pool: &[usize],
    weights: &[u64],
    scores: &[Option<Score>],
    rng: &mut fastrand::Rng,
) -> usize {
    let w = |i: usize| weights.get(i).copied().unwrap_or(0);
    let ws: Vec<u64> = pool.iter().map(|&i| w(i)).collect();
    let a = draw(&ws, rng).unwrap_or(0);
    if pool.len() < 2 {
        return pool[a];
    }
    let rest: Vec<usize> = (0..pool.len()).filter(|&k| k != a).collect();
    let rest_w: Vec<u64> = rest.iter().map(|&k| ws[k]).collect();
    let b = rest[draw(&rest_w, rng).unwrap_or(0)];
    let (a, b) = (pool[a], pool[b]);
    let score = |i: usize| scores.get(i).copied().flatten().unwrap_or(Score::NEW);
    let known: Vec<f64> = [a, b].iter().filter_map(|&i| score(i).latency).collect();
    let neutral = match known.len() {
        0 => 0.0,
        n => known.iter().sum::<f64>() / n as f64,
    };
    let mean_w = ws.iter().map(|&x| x as f64).sum::<f64>() / ws.len() as f64;
    let prior = |i: usize| match (w(i), mean_w > 0.0) {
        (x, true) if x > 0 => x as f64 / mean_w,
        _ => 1.0,
    };
    let eff = |i: usize| score(i).cost(neutral) / prior(i);
    let (best, worse) = if eff(b) < eff(a) { (b, a) } else { (a, b) };
    if rng.f64() < EXPLORE {
        worse
    } else {
        best
    }
}

#[cfg(test)]
#[path = "latency_tests.rs"]
mod tests;
