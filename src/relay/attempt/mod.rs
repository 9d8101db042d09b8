//! The attempt loop (R4): plan the request's attempts and admit it; then, for each step of
//! the plan, exchange with that upstream, classify what came back and act on the decision —
//! until an answer is committed, or the plan, the deadline or the retry budget ends it (R4,
//! R5, R9.3, R10, R12.1).
//!
//! This is the only place that sequences upstream attempts for a request. What follows an
//! attempt is decided by `routing::policy::decide` alone, from the facts of its outcome
//! (`OutcomeFacts`, derived once) and of the request (`Facts`: the breaker's admission, the
//! time left and the retry budget among them).

pub mod admit;
pub(in crate::relay) mod compat;
pub mod estimate;
pub mod exchange;
pub(in crate::relay) mod hedge;
pub mod holds;
pub mod keys;
pub mod plan;
pub mod translated;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::boxed::in_box;
use crate::config::model::Channel;
use crate::error::GatewayError;
use crate::http::body::Resp;
use crate::relay::answer::finish::Finish;
use crate::relay::answer::respond::{failure_response, transport_error, with_route, LastFailure};
use crate::relay::attempt::admit::admit;
use crate::relay::attempt::exchange::{
    exchange, prepare, Exchange, Gates, Prepared, Unprepared, UpstreamFailure,
};
use crate::relay::attempt::hedge::Won;
use crate::relay::attempt::keys::{hold_key, learn, Held, KeyHold};
use crate::relay::attempt::plan::{plan, Planned};
use crate::relay::attempt::translated::Refused;
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::routing::backoff::backoff;
use crate::routing::budget::RetryBudget;
use crate::routing::family::{derived_idempotency_key, forward_idempotency_key};
use crate::routing::outcome::{ChannelFault, Outcome, OutcomeFacts};
use crate::routing::plan::Step;
use crate::routing::policy::{self, Decision, Facts, Settings};
use crate::state::breaker::Admission;
use crate::state::outcome::{refused_outcome, Visits};
use crate::telemetry;

/// Answer one request by walking its plan (see the module doc).
pub async fn run(gw: &Arc<Gateway>, cx: Context) -> Resp {
    let mut walk = match Walk::start(gw, &cx).await {
        Ok(walk) => walk,
        Err(refused) => return refused,
    };
    let mut decision = None;
    while let Some(step) = walk.planned.plan.next(decision.as_ref()) {
        let step = walk.step(step).await;
        if walk.misfits.contains(&step.upstream_model) {
            // R18.3: this upstream model already said the request does not fit it.
            walk.planned.plan.skip_current();
            decision = Some(walk.after_misfit());
            continue;
        }
        let mut gates = walk.gates(&step);
        // R20.1: each attempt is a span of its own, the upstream's parent.
        gates.traceparent = walk.fin.traceparent();
        let prepared = match prepare(&cx, &step, walk.channel(&step), &gates) {
            Ok(p) => Ok(p),
            Err(Unprepared::Failed(e)) => Err(e),
            Err(Unprepared::Skip(refused)) => {
                let decided = walk.skip(&step, &refused);
                if decided.ends() {
                    break;
                }
                decision = Some(decided);
                continue;
            }
        };
        let admission =
            walk.visits
                .admit(step.channel, &step.upstream_model, step.same_target_retry);
        let t0 = crate::clock::fresh();
        let (ex, key) = match walk.send(&step, &gates, prepared, admission).await {
            (Ok(ex), key) => (ex, key),
            (Err(won), key) => return walk.commit_hedge(*won, key),
        };
        let (outcome, answer) = match ex {
            Exchange::Answer(a) => {
                walk.fin.limit.key = key;
                return walk.commit(a, &step, t0);
            }
            Exchange::Failed { outcome, answer } => (outcome, answer),
        };
        let decided = walk.after_failure(outcome, answer, key, &step, admission, t0);
        if decided.ends() {
            break;
        }
        decision = Some(decided);
    }
    walk.fail()
}

/// R18.3 (error-code routing): a 400 whose error code — or, for `context_length_exceeded`,
/// whose message in any provider's words — says the request does not fit the model.
fn misfit(facts: &OutcomeFacts, codes: &[String]) -> bool {
    let Outcome::Status {
        error_code,
        error_type,
        message,
        ..
    } = &facts.outcome
    else {
        return false;
    };
    if !matches!(facts.status, Some(400 | 413)) {
        return false;
    }
    let is = |c: &String| {
        error_code.as_deref() == Some(c.as_str()) || error_type.as_deref() == Some(c.as_str())
    };
    codes
        .iter()
        .any(|c| is(c) || (c == "context_length_exceeded" && context_too_long(message)))
}

/// The providers' words for a prompt longer than the model's context.
fn context_too_long(message: &str) -> bool {
    let message_lower = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "maximum context length",
        "context_length_exceeded",
        "context window",
        "input is too long",
        "exceeds the maximum number of tokens",
    ]
    .iter()
    .any(|p| message_lower.contains(p))
}

/// One request's walk through its plan: what the loop carries from attempt to attempt.
pub(super) struct Walk<'a> {
    pub(super) gw: &'a Arc<Gateway>,
    pub(super) cx: &'a Context,
    pub(super) planned: Planned,
    pub(super) visits: Visits<'a>,
    /// Boxed (with `Finish::new`): the walk is moved into its commit and the record into
    /// a stream's observer, each a pointer instead of ~1 KB copied.
    pub(super) fin: Box<Finish>,
    /// The failure to answer with if nothing succeeds.
    last: LastFailure,
    /// The first target (channel, upstream model): its attempts carry the idempotency key.
    first: Option<(usize, Arc<str>)>,
    rng: fastrand::Rng,
    deadline: Instant,
    budget: Arc<RetryBudget>,
    /// The backoff drawn for a same-target retry of the current target: a fact of its
    /// classification, waited before the retry is made.
    backoff: Duration,
    /// The current attempt was held back by its key's limits (never reached the upstream).
    held: bool,
    /// `last` is a translation refusal (R16.1): any later failure is more useful.
    last_is_skip: bool,
    /// Upstream models that answered that the request does not fit them
    /// (`routing.failover_on_codes`): never sent the same request again.
    pub(super) misfits: Vec<Arc<str>>,
    /// The current attempt's 429 asked for a wait within `routing.wait_retry_after`: it is
    /// waited out on the same target instead of failing over.
    short_wait: Option<Duration>,
    /// The soonest a held-back key has room again (`Retry-After` of the final 429).
    held_wait: Option<Duration>,
    /// Hedges sent for this request (R19.3, at most `resilience.hedge.max_extra`).
    pub(super) hedges: u32,
    /// The attempt that lost a hedge race, recorded after the one that answered.
    /// Boxed: hedges are rare, and the walk is moved whole into its commit.
    pub(super) lost: Option<Box<crate::relay::attempt::hedge::Loser>>,
}

impl<'a> Walk<'a> {
    /// Plan the attempts, then admit the request (R11.1; rate limits go first, R15.1). A
    /// refused request is answered at once. The walk lives in a box: inline it was ~1 KB
    /// copied out of this future, into the loop's and into its commit (it is still copied
    /// once, into its box).
    async fn start(gw: &'a Arc<Gateway>, cx: &'a Context) -> Result<Box<Walk<'a>>, Resp> {
        let deadline = crate::clock::instant() + cx.snap.table.config.timeouts.request_deadline;
        let mut rng = fastrand::Rng::new();
        let mut fin = Finish::new(gw, cx);
        let planned = plan(gw, cx, &mut fin, &mut rng);
        let budget = gw.budget();
        budget.record_first_attempt();
        if let Err(r) = admit(gw, cx, &mut fin).await {
            fin.set_error_code(r.error.code);
            fin.failed(r.error.status.as_u16());
            return Err(r.resp);
        }
        Ok(Box::new(Walk {
            gw,
            cx,
            planned,
            visits: Visits::new(&cx.snap, &gw.store).streaming(cx.wants_stream()),
            fin,
            last: LastFailure::None,
            first: None,
            rng,
            deadline,
            budget,
            backoff: Duration::ZERO,
            held: false,
            last_is_skip: false,
            misfits: Vec::new(),
            short_wait: None,
            held_wait: None,
            hedges: 0,
            lost: None,
        }))
    }

    pub(super) fn channel(&self, step: &Step) -> &'a Channel {
        &self.cx.snap.table.channels[step.channel]
    }

    /// The plan's step as the loop makes it: with its real key (the plan walks enabled keys
    /// only, R7.1); after a failed attempt, the move counted or — for a same-target retry —
    /// its backoff waited (R4.5).
    async fn step(&mut self, mut step: Step) -> Step {
        step.key_index = self.planned.keys.key(step.channel, step.key_index);
        let ch = self.channel(&step);
        if self.fin.attempts() > 0 {
            if step.same_target_retry > 0 {
                metrics::counter!(telemetry::RETRIES, "channel" => ch.name.clone()).increment(1);
                tokio::time::sleep(self.backoff).await;
            } else {
                let from = self.fin.last_channel().to_string();
                metrics::counter!(telemetry::FAILOVERS, "from" => from, "to" => ch.name.clone())
                    .increment(1);
            }
        }
        self.first
            .get_or_insert((step.channel, step.upstream_model.clone()));
        step
    }

    /// Send one planned attempt: not at all when the breaker refused it (R6.1: it fails
    /// like a 503), held back when its key has no room (R15), else upstream, hedged when
    /// the channel asks for it (R19.3). With the exchange, or the hedge that answered first
    /// (to commit), goes the key hold the attempt ran under.
    async fn send(
        &mut self,
        step: &Step,
        gates: &Gates,
        prepared: Result<Prepared, Box<Exchange>>,
        admission: Admission,
    ) -> (Result<Exchange, Box<Won>>, KeyHold) {
        self.held = false;
        if admission == Admission::Refused {
            let outcome = refused_outcome(&self.channel(step).name);
            return (
                Ok(Exchange::Failed {
                    outcome,
                    answer: None,
                }),
                None,
            );
        }
        let key = match self.hold_key(step).await {
            Ok(hold) => hold,
            Err(held) => return (Ok(self.held_back(held)), None),
        };
        let p = match prepared {
            Ok(p) => p,
            Err(e) => return (Ok(*e), key),
        };
        let ch = self.channel(step);
        match self.hedge_after(step) {
            // Boxed (`boxed::in_box`): inline, the exchange (~6.8 KB) would make the loop's
            // future that much larger, and a future is copied whole each time it is moved
            // (4 KB less copied per request, for one allocation).
            None => {
                let ex = in_box(|| exchange(self.gw, self.cx, step, ch, gates, p));
                (Ok(ex.await), key)
            }
            // Boxed: the race holds two exchanges (~18 KB), and inline it would make every
            // request's future that size.
            Some(after) => {
                let ex = exchange(self.gw, self.cx, step, ch, gates, p);
                (in_box(|| self.hedged(step, after, ex)).await, key)
            }
        }
    }

    /// The time gates of the step's exchange, and the Idempotency-Key it carries (R10.2):
    /// the client's on every attempt at the first target, a key derived for the target on
    /// every attempt at any other, so each target can deduplicate its own retries.
    pub(super) fn gates(&self, step: &Step) -> Gates {
        let key = self.cx.idempotency_key.as_ref().and_then(|k| {
            let first = self.first.as_ref().is_some_and(|(ch, model)| {
                forward_idempotency_key((*ch, model), step.channel, &step.upstream_model)
            });
            if first {
                return Some(k.clone());
            }
            let ch = &self.channel(step).name;
            let derived = derived_idempotency_key(k.as_bytes(), ch, &step.upstream_model);
            http::HeaderValue::from_bytes(&derived).ok()
        });
        Gates::of(
            &self.cx.snap.table.config,
            self.cx.family,
            self.deadline,
            key,
        )
    }

    /// What the attempt's outcome means, once, for every consumer.
    fn facts(&self, outcome: &Outcome, step: &Step, admission: Admission) -> OutcomeFacts {
        let ch = self.channel(step);
        let facts = OutcomeFacts::of(outcome, &ch.status_code_mapping, self.cx.family);
        match admission {
            Admission::Refused => facts.refused(),
            _ => facts,
        }
    }

    /// Classify the attempt (R4.4, R4.5, R10): the request's facts, its limits included.
    fn classify(
        &mut self,
        outcome_facts: &OutcomeFacts,
        step: &Step,
        admission: Admission,
    ) -> Decision {
        let (cx, ch) = (self.cx, self.channel(step));
        let cfg = &cx.snap.table.config;
        self.backoff = backoff(
            &ch.resilience.retry,
            step.same_target_retry + 1,
            &mut self.rng,
        );
        let first_attempt = self.fin.attempts() == 0;
        let facts = Facts {
            family: cx.family,
            has_idempotency_key: cx.idempotency_key.is_some(),
            is_task: cx.is_task,
            alternatives_left: self.planned.plan.alternatives_left(),
            same_target_retries: step.same_target_retry,
            attempts_left: self.planned.plan.attempts_left(),
            affinity_skip_retry: self
                .planned
                .sticky
                .as_ref()
                .is_some_and(|s| s.skip_retry(step.channel, first_attempt)),
            breaker_admitted: admission == Admission::Admitted,
            time_left: self.deadline.saturating_duration_since(Instant::now()),
            retry_backoff: self.backoff,
            retry_budget: true,
        };
        let settings = Settings {
            routing: &cfg.routing,
            retry: &ch.resilience.retry,
            images: &cfg.images_failover,
        };
        let budget = &self.budget;
        if let Some(wait) = self.short_wait {
            self.backoff = wait;
            return match budget.try_acquire_retry() {
                true => Decision::RetrySame {
                    attempt: step.same_target_retry + 1,
                },
                false => Decision::OutOfBudget,
            };
        }
        if misfit(outcome_facts, &cfg.routing.failover_on_codes) {
            self.misfits.push(step.upstream_model.clone());
            return match self.after_misfit() {
                Decision::FailOver { .. } if !budget.try_acquire_retry() => Decision::OutOfBudget,
                d => d,
            };
        }
        // B-log-truth: moving off a key held back by its own limits reached no upstream and
        // takes nothing from the retry budget.
        let held = self.held;
        policy::decide(outcome_facts, &facts, &settings, || {
            held || budget.try_acquire_retry()
        })
    }

    /// After a "does not fit" answer: fail over while a planned target maps the model to
    /// another upstream model, else return that answer.
    fn after_misfit(&self) -> Decision {
        let other = self
            .planned
            .plan
            .upcoming()
            .iter()
            .any(|t| !self.misfits.contains(&t.upstream_model));
        if other {
            Decision::FailOver { key_fault: false }
        } else {
            Decision::Return
        }
    }

    /// Act on a failed attempt: count and record it (R4.6, R12.1), feed its target's visit
    /// (breaker, cooldown, health, auto-disable; R6, R7), keep the failure to answer with,
    /// and end the visit when the loop moves off the target.
    fn act(
        &mut self,
        f: &OutcomeFacts,
        answer: Option<UpstreamFailure>,
        step: &Step,
        admission: Admission,
        d: Decision,
        elapsed: Duration,
    ) {
        let ch = self.channel(step);
        metrics::counter!(telemetry::ATTEMPTS, "channel" => ch.name.clone(), "outcome" => f.class)
            .increment(1);
        self.fin.record(
            ch,
            &self.cx.snap.states[step.channel],
            step.key_index,
            &step.upstream_model,
            f,
            elapsed,
        );
        if let Some(last) = self.failure(f, answer, step, admission) {
            self.last = last;
            self.last_is_skip = false;
        }
        if admission != Admission::Refused && !self.held {
            self.visits
                .attempt(step.channel, step.key_index, f, elapsed);
        }
        match d {
            Decision::RetrySame { .. } => return,
            Decision::OutOfTime => {
                self.last = LastFailure::Gateway(GatewayError::deadline_exceeded());
            }
            Decision::OutOfBudget => {
                metrics::counter!(telemetry::RETRY_BUDGET_EXHAUSTED).increment(1);
            }
            _ => {}
        }
        self.visits.settle();
    }

    /// R16.1 (a refusal is never the final word while a target can serve): the step's
    /// channel cannot take the request in its format without changing its meaning. The
    /// target is skipped locally — logged with its reason, recorded in the chain, but not
    /// counted by breakers, cooldowns, health, the retry budget or `retry_times` — and the
    /// plan moves on. The refusal answers the client only if no other failure does.
    fn skip(&mut self, step: &Step, refused: &Refused) -> Decision {
        let ch = self.channel(step);
        tracing::debug!(
            request_id = self.cx.rid(),
            channel = %ch.name,
            reason = %refused.reason,
            "target skipped: its format cannot express this request"
        );
        metrics::counter!(telemetry::ATTEMPTS, "channel" => ch.name.clone(),
            "outcome" => OutcomeFacts::SKIPPED)
        .increment(1);
        let st = &self.cx.snap.states[step.channel];
        let skipped = OutcomeFacts::skipped();
        self.fin.record(
            ch,
            st,
            step.key_index,
            &step.upstream_model,
            &skipped,
            Duration::ZERO,
        );
        if matches!(self.last, LastFailure::None) || self.last_is_skip {
            let failure = refused.failure(http::HeaderMap::new());
            let (status, headers, body) = failure.for_client(refused.status);
            self.last = LastFailure::Upstream {
                status,
                headers,
                body,
            };
            self.last_is_skip = true;
        }
        if self
            .first
            .as_ref()
            .is_some_and(|(c, m)| *c == step.channel && *m == step.upstream_model)
        {
            self.first = None;
        }
        self.planned.plan.skip_current();
        if self.planned.plan.alternatives_left() {
            Decision::FailOver { key_fault: false }
        } else {
            Decision::Return
        }
    }

    /// R15.3: take the step's key's share of its limits (waiting a bounded time for room).
    /// R15.3: the key has no room — fail over without reaching the upstream, remembering the
    /// soonest a held-back key has room.
    fn held_back(&mut self, held: Held) -> Exchange {
        self.held = true;
        self.held_wait = match (self.held_wait, held.wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Exchange::Failed {
            outcome: Outcome::ChannelError(ChannelFault::KeyHeldBack(held.why)),
            answer: None,
        }
    }

    /// A failed attempt: its key settled, its answer learnt from (unless waited out), the
    /// decision taken and acted on.
    fn after_failure(
        &mut self,
        outcome: Outcome,
        answer: Option<UpstreamFailure>,
        key: KeyHold,
        step: &Step,
        admission: Admission,
        t0: Instant,
    ) -> Decision {
        if let Some(k) = key {
            k.settle(0, Instant::now());
        }
        self.short_wait = self.short_retry_after(&answer, admission);
        if self.short_wait.is_none() {
            self.learn(&answer, step);
        }
        let elapsed = t0.elapsed();
        let facts = self.facts(&outcome, step, admission);
        let decision = self.classify(&facts, step, admission);
        self.act(&facts, answer, step, admission, decision, elapsed);
        self.flush_lost();
        decision
    }

    pub(super) async fn hold_key(&self, step: &Step) -> Result<KeyHold, Held> {
        let tokens = crate::relay::attempt::estimate::estimate_tokens(self.cx);
        let ch = self.channel(step);
        let snap = &self.cx.snap;
        hold_key(
            self.gw,
            snap,
            ch,
            step.channel,
            step.key_index,
            tokens,
            self.deadline,
        )
        .await
    }

    /// R18.2 (`virtual_models.*.stream_resume`, else `resilience.stream_resume` of the
    /// committed channel): what continues this stream if it is cut — the plan's remaining
    /// targets, in order.
    pub(super) fn resumer(&self, step: &Step) -> Option<crate::relay::answer::resume::Resumer> {
        let own = self.cx.routes.iter().find_map(|(_, r)| r.stream_resume);
        let cfg = own.unwrap_or(self.channel(step).resilience.stream_resume);
        if !cfg.enabled || !self.cx.wants_stream() {
            return None;
        }
        let targets = self
            .planned
            .plan
            .upcoming()
            .iter()
            .map(|t| {
                let key = self.planned.keys.key(t.channel, 0);
                (t.channel, key, t.upstream_model.clone())
            })
            .collect();
        crate::relay::answer::resume::Resumer::new(
            self.gw.clone(),
            self.cx.clone(),
            targets,
            cfg.max,
            self.deadline,
        )
    }

    /// B-wait-retry-after (`routing.wait_retry_after`): a 429 that asks for a wait no longer than the
    /// setting — and than the time left — is waited out on the same target, once, rather
    /// than failing over to a more expensive tier. Not for a half-open probe.
    fn short_retry_after(
        &self,
        answer: &Option<UpstreamFailure>,
        admission: Admission,
    ) -> Option<Duration> {
        let max = self.cx.snap.table.config.routing.wait_retry_after;
        let rate_limited = answer
            .as_ref()
            .filter(|rate_limited| rate_limited.status == 429)?;
        if max.is_zero() || admission != Admission::Admitted || self.short_wait.is_some() {
            return None;
        }
        let hint = crate::limits::upstream::rate_limited(
            &rate_limited.headers,
            std::time::SystemTime::now(),
        )?;
        let left = self.deadline.saturating_duration_since(Instant::now());
        (hint.wait <= max && hint.wait < left).then_some(hint.wait)
    }

    /// R15.3: an upstream's rate-limit answer cools that key (not the channel).
    fn learn(&self, answer: &Option<UpstreamFailure>, step: &Step) {
        if let Some(a) = answer.as_ref().filter(|a| a.status == 429) {
            learn(
                self.gw,
                &self.cx.snap,
                step.channel,
                step.key_index,
                &a.headers,
            );
        }
    }

    /// The failure a failed attempt leaves for the client: the upstream's answer (with its
    /// status after mapping), or the gateway's own error.
    fn failure(
        &self,
        f: &OutcomeFacts,
        answer: Option<UpstreamFailure>,
        step: &Step,
        admission: Admission,
    ) -> Option<LastFailure> {
        let ch = self.channel(step);
        let gateway = |e| Some(LastFailure::Gateway(e));
        if admission == Admission::Refused {
            return if self.cx.snap.states[step.channel].is_disabled() {
                gateway(GatewayError::no_channel_available(self.cx.model()))
            } else {
                gateway(GatewayError::breaker_open(&ch.name))
            };
        }
        if self.held {
            return gateway(GatewayError::new(
                http::StatusCode::TOO_MANY_REQUESTS,
                "upstream_rate_limited",
                "rate_limit_error",
                "every upstream key that serves this model is at its rate limit \
                 (channels.*.limits or an upstream's reset); retry later",
            ));
        }
        match &f.outcome {
            Outcome::Transport(k) => gateway(transport_error(*k)),
            Outcome::DeadlineExceeded => gateway(GatewayError::deadline_exceeded()),
            Outcome::ChannelError(m) => {
                let detail = format!("channel {} cannot send this request ({m})", ch.name);
                gateway(GatewayError::upstream_unreachable(&detail))
            }
            Outcome::LocalAdapter(m) | Outcome::SkipRetry(m) => {
                gateway(GatewayError::internal(m.clone()))
            }
            // An error event in a 200 stream carries no answer of its own: the client gets
            // its status and message, not a claim that no channel was available.
            Outcome::Status { code, message, .. } if answer.is_none() => gateway(
                GatewayError::upstream_status(f.status.unwrap_or(*code), &ch.name, message),
            ),
            _ => answer.map(|a| {
                let status = f.status.unwrap_or(a.status);
                let (status, headers, body) = a.for_client(status);
                LastFailure::Upstream {
                    status,
                    headers,
                    body,
                }
            }),
        }
    }

    /// Nothing succeeded: answer with the last failure (scrubbed) and close the record.
    fn fail(self: Box<Self>) -> Resp {
        let debug = self.cx.snap.table.config.debug_headers;
        let route = self.fin.chain();
        let mut resp = failure_response(self.last, self.cx);
        if let (Some(wait), 429) = (self.held_wait, resp.status().as_u16()) {
            // B-log-truth: the client learns when a key has room again (whole seconds, rounded
            // down: a minute window's wait of 60.2 s says 60 — Claude Code gives up above 60).
            let secs = (wait.as_millis() / 1000).max(1);
            if let Ok(v) = http::HeaderValue::from_str(&secs.to_string()) {
                resp.headers_mut().insert(http::header::RETRY_AFTER, v);
            }
        }
        self.fin.failed(resp.status().as_u16());
        with_route(resp, debug, &route)
    }
}
