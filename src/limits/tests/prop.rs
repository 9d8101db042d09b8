//! Property tests (R15.1): whatever the arrivals, costs, settles and cancels, what is admitted
//! in ANY span of a window's length never exceeds the limit, and a refusal's wait is exact.
use std::collections::VecDeque;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use crate::limits::window::{Geometry, Window};
use crate::limits::{Admission, Bounds, ClientLimits, Limiter, LocalGrant};

/// The largest sum of `(time, amount)` over any half-open span `(t − span, t]`.
fn worst_span(events: &[(u64, u64)], span: u64) -> u64 {
    events
        .iter()
        .map(|&(t, _)| {
            events
                .iter()
                .filter(|&&(u, _)| u <= t && u + span > t)
                .map(|&(_, a)| a)
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_window_never_admits_more_than_its_limit_in_any_span(
        granule in 1u64..50,
        slots in 1u64..30,
        limit in 1u64..20,
        arrivals in prop::collection::vec((0u64..150, 1u64..25), 1..200),
    ) {
        let geo = Geometry { granule_ms: granule, slots };
        let mut window = Window::new(geo);
        let (mut now, mut admitted) = (0u64, Vec::new());
        for (gap, cost) in arrivals {
            now += gap;
            match window.wait_ms(cost, limit, now) {
                Some(0) => {
                    window.advance(now);
                    window.add(cost);
                    admitted.push((now, cost));
                }
                Some(wait) => {
                    // Exact: it fits at now + wait, and not a millisecond earlier.
                    prop_assert_eq!(window.wait_ms(cost, limit, now + wait), Some(0));
                    prop_assert!(window.wait_ms(cost, limit, now + wait - 1) != Some(0));
                }
                None => prop_assert!(cost > limit),
            }
        }
        prop_assert!(worst_span(&admitted, geo.span_ms()) <= limit);
    }

    #[test]
    fn a_client_never_gets_more_than_its_limits_in_any_minute(
        rpm in 1u64..15,
        tpm in 100u64..1000,
        steps in prop::collection::vec((0u64..4000, 1u64..300, 0u8..4, 0u64..=100), 1..150),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let (requests, tokens) = rt.block_on(drive(rpm, tpm, steps));
        prop_assert!(worst_span(&requests, 60_000) <= rpm, "requests {:?}", requests);
        prop_assert!(worst_span(&tokens, 60_000) <= tpm, "tokens {:?}", tokens);
    }
}

/// An admission still open, with what its settle will report.
struct Open {
    admission: Admission<LocalGrant>,
    at: u64,
    reserved: u64,
}

/// Run random arrivals against one client; return the final (time, charge) of each
/// admitted request for requests and for tokens. Each step may also end the oldest open
/// request: settle at `pct`% of its reservation, cancel, or drop (charged the reservation).
async fn drive(
    rpm: u64,
    tpm: u64,
    steps: Vec<(u64, u64, u8, u64)>,
) -> (Vec<(u64, u64)>, Vec<(u64, u64)>) {
    let limiter = Limiter::local(Bounds::default());
    let lim = ClientLimits {
        rpm,
        tpm,
        ..ClientLimits::default()
    };
    let start = Instant::now();
    let (mut open, mut requests, mut tokens) = (VecDeque::new(), Vec::new(), Vec::new());
    for (gap, reserve, end, pct) in steps {
        tokio::time::advance(Duration::from_millis(gap)).await;
        let now = Instant::now();
        let at = now.duration_since(start).as_millis() as u64;
        if let Ok(admission) = limiter.admit_client_now("p", &lim, reserve, now) {
            open.push_back(Open {
                admission,
                at,
                reserved: reserve,
            });
        }
        let Some(o) = (end > 0).then(|| open.pop_front()).flatten() else {
            continue;
        };
        let (req, tok) = match end {
            1 => {
                let used = o.reserved * pct / 100;
                o.admission.settle(used, now);
                (1, used)
            }
            2 => {
                o.admission.cancel(now);
                (0, 0)
            }
            _ => {
                drop(o.admission);
                (1, o.reserved)
            }
        };
        requests.push((o.at, req));
        tokens.push((o.at, tok));
    }
    for o in open {
        requests.push((o.at, 1));
        tokens.push((o.at, o.reserved));
    }
    (requests, tokens)
}
