//! Same-target retry backoff: exponential, capped, with symmetric jitter (R4.5).

use std::time::Duration;

use crate::config::model::Retry;

/// Delay before the `attempt`-th (1-based) same-target retry:
/// `initial_backoff × backoff_factor^(attempt-1)`, capped at `max_backoff`, then
/// moved by a uniform ±`jitter_factor` share, never below zero, and capped again.
pub fn backoff(retry: &Retry, attempt: u32, rng: &mut fastrand::Rng) -> Duration {
    let cap = retry.max_backoff.as_secs_f64();
    let exp = attempt.saturating_sub(1).min(i32::MAX as u32) as i32;
    let factor = if retry.backoff_factor.is_finite() && retry.backoff_factor > 0.0 {
        retry.backoff_factor
    } else {
        1.0
    };
    let mut base = retry.initial_backoff.as_secs_f64() * factor.powi(exp);
    if !base.is_finite() || base > cap {
        base = cap;
    }
    let j = if retry.jitter_factor.is_finite() {
        retry.jitter_factor.clamp(0.0, 1.0)
    } else {
        0.0
    };
    // u in [-1, 1)
    let u = rng.f64() * 2.0 - 1.0;
    let secs = (base * (1.0 + j * u)).clamp(0.0, cap);
    Duration::try_from_secs_f64(secs).unwrap_or(retry.max_backoff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::status_set::StatusSet;

    fn retry(jitter: f64) -> Retry {
        Retry {
            max_retries: 3,
            retry_on: StatusSet::empty(),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            backoff_factor: 2.0,
            jitter_factor: jitter,
        }
    }

    #[test]
    fn exponential_without_jitter() {
        let r = retry(0.0);
        let mut rng = fastrand::Rng::with_seed(1);
        let got: Vec<u64> = (1..=7)
            .map(|a| backoff(&r, a, &mut rng).as_millis() as u64)
            .collect();
        assert_eq!(got, vec![1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        // attempt 0 is treated as the first retry; huge attempts stay capped
        assert_eq!(backoff(&r, 0, &mut rng), Duration::from_secs(1));
        assert_eq!(backoff(&r, u32::MAX, &mut rng), Duration::from_secs(30));
    }

    #[test]
    fn jitter_is_symmetric_bounded_and_capped() {
        let r = retry(0.1);
        let mut rng = fastrand::Rng::with_seed(9);
        let (mut lo, mut hi) = (false, false);
        for _ in 0..1000 {
            let d = backoff(&r, 3, &mut rng).as_secs_f64();
            assert!((3.6..=4.4).contains(&d), "{d}");
            lo |= d < 3.9;
            hi |= d > 4.1;
            let c = backoff(&r, 10, &mut rng);
            assert!(c <= Duration::from_secs(30));
            assert!(c >= Duration::from_secs(27));
        }
        assert!(lo && hi, "jitter goes both ways");
        let wild = retry(5.0);
        for _ in 0..100 {
            let d = backoff(&wild, 1, &mut rng);
            assert!(
                d <= Duration::from_secs(2),
                "jitter clamped to 100 %: {d:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn sleeping_the_delays_advances_paused_clock() {
        let r = retry(0.0);
        let mut rng = fastrand::Rng::with_seed(3);
        let start = tokio::time::Instant::now();
        for attempt in 1..=3 {
            tokio::time::sleep(backoff(&r, attempt, &mut rng)).await;
        }
        assert_eq!(start.elapsed(), Duration::from_secs(1 + 2 + 4));
    }
}
