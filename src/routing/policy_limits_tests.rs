//! The request's limits are inputs of the classifier (R6.1, R4.7, R4.9): the breaker's
//! admission, the time left against the retry's backoff, and the retry budget — in that
//! order — and `decide` asks the budget only for a decision that makes another attempt.
use std::cell::Cell;
use std::time::Duration;

use super::tests::{facts, status, Env};
use super::*;

const S: Duration = Duration::from_secs(1);

/// One target left, a 503 that may repeat: the classifier would retry it.
fn alone() -> Facts {
    Facts {
        alternatives_left: false,
        ..facts()
    }
}

#[test]
fn limits_table() {
    let env = Env::new();
    let retry = Decision::RetrySame { attempt: 1 };
    let fo = Decision::FailOver { key_fault: false };
    let with = |f: Facts, admitted: bool, left: u64, wait: u64, budget: bool| Facts {
        breaker_admitted: admitted,
        time_left: S * left as u32,
        retry_backoff: S * wait as u32,
        retry_budget: budget,
        ..f
    };
    let cases: &[(&str, Facts, Decision)] = &[
        ("no limit reached", with(alone(), true, 10, 1, true), retry),
        // R6.1: a half-open probe or a refused target is never repeated.
        ("probe", with(alone(), false, 10, 1, true), Decision::Return),
        // R4.7: the backoff must end before the deadline (equal is too late).
        (
            "backoff past deadline",
            with(alone(), true, 1, 2, true),
            Decision::OutOfTime,
        ),
        (
            "backoff at deadline",
            with(alone(), true, 2, 2, true),
            Decision::OutOfTime,
        ),
        (
            "deadline passed",
            with(alone(), true, 0, 0, true),
            Decision::OutOfTime,
        ),
        // R4.9: no retry and no failover past the budget.
        (
            "retry, no budget",
            with(alone(), true, 10, 1, false),
            Decision::OutOfBudget,
        ),
        (
            "failover, no budget",
            with(facts(), true, 10, 1, false),
            Decision::OutOfBudget,
        ),
        (
            "failover ignores the deadline",
            with(facts(), true, 0, 5, true),
            fo,
        ),
        // The order: admission, then the deadline, then the budget.
        (
            "probe out of time",
            with(alone(), false, 0, 5, false),
            Decision::Return,
        ),
        (
            "out of time and budget",
            with(alone(), true, 0, 5, false),
            Decision::OutOfTime,
        ),
    ];
    for (name, f, want) in cases {
        assert_eq!(env.run(&status(503), f), *want, "{name}");
    }
}

#[test]
fn limits_never_touch_an_answer_or_a_return() {
    let env = Env::new();
    let spent = Facts {
        breaker_admitted: false,
        time_left: Duration::ZERO,
        retry_budget: false,
        ..facts()
    };
    assert_eq!(env.run(&status(200), &spent), Decision::Done);
    assert_eq!(env.run(&Outcome::Success, &spent), Decision::Done);
    // 400 is returned (not in failover_on): nothing to limit.
    assert_eq!(env.run(&status(400), &spent), Decision::Return);
    // A channel error with no target left makes no attempt: no budget needed.
    let none_left = Facts {
        alternatives_left: false,
        ..spent
    };
    let outcome = Outcome::ChannelError(crate::routing::outcome::ChannelFault::InvalidKey);
    assert_eq!(
        env.run(&outcome, &none_left),
        Decision::FailOver { key_fault: true }
    );
}

#[test]
fn decide_asks_the_budget_only_for_another_attempt() {
    let env = Env::new();
    let settings = Settings {
        routing: &env.routing,
        retry: &env.retry,
        images: &env.images,
    };
    let of = |o: &Outcome, f: &Facts| OutcomeFacts::of(o, &env.mapping, f.family);
    let asked = Cell::new(0);
    let ask = |answer: bool| {
        let asked = &asked;
        move || {
            asked.set(asked.get() + 1);
            answer
        }
    };
    // A failover with room: one token taken.
    let facts = facts();
    let decision = decide(&of(&status(503), &facts), &facts, &settings, ask(true));
    assert_eq!(
        (decision, asked.get()),
        (Decision::FailOver { key_fault: false }, 1)
    );
    // The budget says no: the classifier returns the outcome, counted as out of budget.
    let decision = decide(&of(&status(503), &facts), &facts, &settings, ask(false));
    assert_eq!((decision, asked.get()), (Decision::OutOfBudget, 2));
    // Nothing to retry: the budget is not asked.
    for o in [status(200), status(400), Outcome::ClientGone] {
        decide(&of(&o, &facts), &facts, &settings, ask(true));
    }
    let probe = Facts {
        breaker_admitted: false,
        ..alone()
    };
    decide(&of(&status(503), &probe), &probe, &settings, ask(true));
    let late = Facts {
        time_left: Duration::ZERO,
        ..alone()
    };
    assert_eq!(
        decide(&of(&status(503), &late), &late, &settings, ask(true)),
        Decision::OutOfTime
    );
    assert_eq!(asked.get(), 2, "asked only for decisions that retry");
}
