//! Hedged requests (R19.3, `resilience.hedge`, opt-in): an attempt whose first byte — the
//! commit point of a stream, the whole answer of a non-stream request — has not come
//! `after` its send, of a request safe to send twice (R10.1: replayable after an ambiguous
//! failure, not a task), also goes to the plan's next available target. The first to
//! commit wins and the other is dropped at once (its upstream connection closed: the
//! upstream sees the client leave). Everything here happens before the commit point, so a
//! stream that reached the client is never hedged.
//!
//! The client is charged once, for the winner (billing settles at the commit, as for any
//! answer); the cancelled attempt is recorded in the request's chain as `hedge_cancelled`,
//! `possibly_charged` (its upstream may bill it), and counts for no breaker. Hedges are
//! bounded per request (`max_extra`) and across the process by a hedge budget like the
//! retry budget: `budget_ratio` hedges per hedgeable attempt over the last 10 s, without a
//! floor. `switchyard_hedges_total{outcome}`: `won`, `lost`, `failed` (the hedge failed),
//! `budget` (not sent: the budget was spent).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::lock::lock;
use crate::relay::attempt::exchange::{exchange, prepare, Answer, Exchange};
use crate::relay::attempt::keys::KeyHold;
use crate::relay::attempt::Walk;
use crate::routing::budget::RetryBudget;
use crate::routing::family::retryable;
use crate::routing::outcome::{Outcome, OutcomeFacts};
use crate::routing::plan::Step;
use crate::telemetry;

/// The hedge budget's window.
const WINDOW: Duration = Duration::from_secs(10);

/// How a hedged attempt ended. Made and moved once per hedged attempt (as `Exchange`).
#[allow(clippy::large_enum_variant)]
pub(in crate::relay) enum Raced {
    /// The attempt's own result: no hedge was sent, the hedge lost (cancelled) or failed.
    First(Exchange),
    /// The hedge committed first; the first attempt was cancelled or had failed.
    Hedge(Box<Won>),
}

/// A hedge that committed first, and the first attempt it replaced.
pub(in crate::relay) struct Won {
    answer: Answer,
    step: Step,
    key: KeyHold,
    t0: Instant,
    first: Loser,
}

/// An attempt that did not answer the client: recorded in the chain by the walk.
pub(in crate::relay) struct Loser {
    step: Step,
    facts: OutcomeFacts,
    elapsed: Duration,
}

/// The process's hedge budget at `ratio` (a new one when the ratio changes).
fn budget(ratio: f64) -> Arc<RetryBudget> {
    static BUDGET: Mutex<Option<(u64, Arc<RetryBudget>)>> = Mutex::new(None);
    let mut slot = lock(&BUDGET);
    if let Some((bits, budget)) = slot.as_ref() {
        if *bits == ratio.to_bits() {
            return budget.clone();
        }
    }
    let fresh = Arc::new(RetryBudget::new(ratio, 0, WINDOW));
    *slot = Some((ratio.to_bits(), fresh.clone()));
    fresh
}

fn count(outcome: &'static str) {
    metrics::counter!(telemetry::HEDGES, "outcome" => outcome).increment(1);
}

/// The facts of an attempt cancelled because the other one committed first.
pub(in crate::relay) fn cancelled() -> OutcomeFacts {
    let mut facts = OutcomeFacts::of(
        &Outcome::ClientGone,
        &Default::default(),
        crate::routing::family::PathFamily::Chat,
    );
    facts.possibly_charged = true;
    facts.class = "hedge_cancelled";
    facts
}

impl Walk<'_> {
    /// The hedge delay of `step`, when it may be hedged: hedging on for its channel, the
    /// request safe to send twice, a fresh target, hedges left for the request.
    pub(in crate::relay) fn hedge_after(&self, step: &Step) -> Option<Duration> {
        let hedge = &self.channel(step).resilience.hedge;
        let safe = retryable(self.cx.family, self.cx.idempotency_key.is_some()) && !self.cx.is_task;
        let left = self.hedges < hedge.max_extra;
        if !(hedge.enabled && safe && left && step.same_target_retry == 0) {
            return None;
        }
        if !hedge.p95 {
            return Some(hedge.after);
        }
        // `after: p95`: the target's own recent times to first byte (the fixed delay until
        // enough are known), never below 10 ms.
        let st = &self.cx.snap.states[step.channel];
        let p95 = st.scores.p95(&step.upstream_model, self.cx.wants_stream());
        Some(p95.unwrap_or(hedge.after).max(Duration::from_millis(10)))
    }

    /// The plan's next target that could take the hedge now (available, another target, one
    /// that has not said the request does not fit it), with the key the plan would use.
    fn hedge_target(&self, step: &Step) -> Option<Step> {
        let snap = &self.cx.snap;
        let now = Instant::now();
        let target = self.planned.plan.upcoming().iter().find(|t| {
            let same = t.channel == step.channel && t.upstream_model == step.upstream_model;
            !same
                && !self.misfits.contains(&t.upstream_model)
                && crate::state::outcome::available(
                    &snap.table.channels[t.channel],
                    &snap.states[t.channel],
                    &t.upstream_model,
                    now,
                )
        })?;
        Some(Step {
            group: target.group,
            channel: target.channel,
            key_index: self.planned.keys.key(target.channel, 0),
            upstream_model: target.upstream_model.clone(),
            same_target_retry: 0,
        })
    }

    /// Run `first` (the exchange of `step`); if it has not answered `after` its start, send
    /// the hedge (see the module doc). Returns the result and the attempt that lost, if any.
    pub(in crate::relay) async fn race(
        &self,
        step: &Step,
        after: Duration,
        first: impl Future<Output = Exchange>,
    ) -> (Raced, Option<Loser>) {
        let ratio = self.channel(step).resilience.hedge.budget_ratio;
        let budget = budget(ratio);
        let started = Instant::now();
        budget.record_first_attempt();
        tokio::pin!(first);
        tokio::select! {
            ex = &mut first => return (Raced::First(ex), None),
            _ = tokio::time::sleep(after) => {}
        }
        let Some(hs) = self.hedge_target(step) else {
            return (Raced::First(first.await), None);
        };
        if !budget.try_acquire_retry() {
            count("budget");
            return (Raced::First(first.await), None);
        }
        let ch = self.channel(&hs);
        let gates = self.gates(&hs);
        let (Ok(p), Ok(key)) = (prepare(self.cx, &hs, ch, &gates), self.hold_key(&hs).await) else {
            return (Raced::First(first.await), None);
        };
        let t0 = Instant::now();
        let second = exchange(self.gw, self.cx, &hs, ch, &gates, p);
        tokio::pin!(second);
        let lost = |hs: Step, key: KeyHold, facts: OutcomeFacts| {
            if let Some(k) = key {
                k.settle(0, Instant::now());
            }
            Some(Loser {
                step: hs,
                facts,
                elapsed: t0.elapsed(),
            })
        };
        tokio::select! {
            ex = &mut first => match ex {
                Exchange::Answer(a) => {
                    count("lost");
                    (Raced::First(Exchange::Answer(a)), lost(hs.clone(), key, cancelled()))
                }
                failed => match second.await {
                    Exchange::Answer(answer) => {
                        count("won");
                        let facts = match &failed {
                            Exchange::Failed { outcome, .. } => self.facts_of(outcome, step),
                            Exchange::Answer(_) => cancelled(),
                        };
                        let first = Loser { step: step.clone(), facts, elapsed: started.elapsed() };
                        (Raced::Hedge(Box::new(Won { answer, step: hs.clone(), key, t0, first })), None)
                    }
                    Exchange::Failed { outcome, .. } => {
                        count("failed");
                        let facts = self.facts_of(&outcome, &hs);
                        (Raced::First(failed), lost(hs.clone(), key, facts))
                    }
                },
            },
            hx = &mut second => match hx {
                Exchange::Answer(answer) => {
                    count("won");
                    let first = Loser { step: step.clone(), facts: cancelled(), elapsed: started.elapsed() };
                    (Raced::Hedge(Box::new(Won { answer, step: hs.clone(), key, t0, first })), None)
                }
                Exchange::Failed { outcome, .. } => {
                    count("failed");
                    let facts = self.facts_of(&outcome, &hs);
                    (Raced::First(first.await), lost(hs.clone(), key, facts))
                }
            },
        }
    }

    /// `first` (the exchange of `step`) raced against a hedge: `Ok` the exchange the loop
    /// goes on with (a losing or failed hedge recorded after it), `Err` the hedge that
    /// committed first, for [`Walk::commit_hedge`].
    pub(in crate::relay) async fn hedged(
        &mut self,
        step: &Step,
        after: Duration,
        first: impl Future<Output = Exchange>,
    ) -> Result<Exchange, Box<Won>> {
        let (raced, loser) = self.race(step, after, first).await;
        let sent = match (&raced, &loser) {
            (Raced::Hedge(won), _) => Some(&won.step),
            (_, Some(l)) => Some(&l.step),
            _ => None,
        };
        if let Some(t) = sent {
            // The hedge's target had its attempt: the plan does not send it again.
            self.hedges += 1;
            self.planned
                .plan
                .take_upcoming(t.channel, &t.upstream_model);
        }
        self.lost = loser.map(Box::new);
        match raced {
            Raced::First(ex) => Ok(ex),
            Raced::Hedge(won) => Err(won),
        }
    }

    /// The hedge committed first: the first attempt is recorded (cancelled or failed, never
    /// for its breaker), its key released, and the hedge's answer committed on its target.
    pub(in crate::relay) fn commit_hedge(
        mut self: Box<Self>,
        won: Won,
        first_key: KeyHold,
    ) -> crate::http::body::Resp {
        if let Some(k) = first_key {
            k.settle(0, Instant::now());
        }
        let Won {
            answer,
            step,
            key,
            t0,
            first,
        } = won;
        self.record_loser(first);
        self.fin.limit.key = key;
        // The first visit ends without a result (a probe slot it held is freed).
        self.visits.admit(step.channel, &step.upstream_model, 0);
        self.commit(answer, &step, t0)
    }

    /// The attempt that lost a race, recorded after the one that answered.
    pub(in crate::relay) fn flush_lost(&mut self) {
        if let Some(l) = self.lost.take() {
            self.record_loser(*l);
        }
    }

    fn facts_of(&self, outcome: &Outcome, step: &Step) -> OutcomeFacts {
        let ch = self.channel(step);
        OutcomeFacts::of(outcome, &ch.status_code_mapping, self.cx.family)
    }

    /// Record an attempt that did not answer: in the chain and the attempt metrics (never
    /// the breaker: a cancelled attempt proves nothing either way).
    pub(in crate::relay) fn record_loser(&mut self, l: Loser) {
        let ch = self.channel(&l.step);
        metrics::counter!(telemetry::ATTEMPTS, "channel" => ch.name.clone(), "outcome" => l.facts.class)
            .increment(1);
        let st = &self.cx.snap.states[l.step.channel];
        self.fin.record(
            ch,
            st,
            l.step.key_index,
            &l.step.upstream_model,
            &l.facts,
            l.elapsed,
        );
    }
}
