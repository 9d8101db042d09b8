//! Committing a successful attempt's answer (R9.3, R8.3, R10.5): the attempt's bookkeeping,
//! then the client's response — a stream relayed from its commit point, a pass-through body,
//! or a full answer. Once committed, nothing is retried.

use std::sync::Arc;

use http::Method;
use tokio::time::Instant;

use crate::http::body::{Resp, ResponseBody};
use crate::relay::answer::finish::LogObserver;
use crate::relay::answer::passthrough;
use crate::relay::answer::respond::respond;
use crate::relay::answer::stream::{self, RelayTimes};
use crate::relay::attempt::exchange::{non_stream_timeout, Answer};
use crate::relay::attempt::Walk;
use crate::relay::intake::task;
use crate::routing::outcome::OutcomeFacts;
use crate::routing::plan::Step;

impl Walk<'_> {
    /// Commit `answer` from `step` (sent at `t0`) and answer the client.
    pub(in crate::relay) fn commit(
        mut self: Box<Self>,
        answer: Answer,
        step: &Step,
        t0: Instant,
    ) -> Resp {
        self.succeeded(step, answer.status(), t0);
        let (gw, cx, ch) = (self.gw, self.cx, self.channel(step));
        let cfg = &cx.snap.table.config;
        let st = &cx.snap.states[step.channel];
        // The attempt chain is shown only with `debug_headers` (the log builds its own).
        let route = if cfg.debug_headers {
            self.fin.chain()
        } else {
            Arc::default()
        };
        let model = step.upstream_model.clone();
        let resumer = match &answer {
            Answer::Stream { .. } => self.resumer(step),
            _ => None,
        };
        // The visit ends (its success recorded) when the walk is dropped here.
        let Walk { mut fin, .. } = *self;
        let idle = non_stream_timeout(cfg, ch);
        match answer {
            Answer::Stream {
                status,
                headers,
                primed,
            } => {
                let obs = LogObserver::new(fin, st.clone(), model, status);
                let times = RelayTimes {
                    keepalive: cfg.timeouts.keepalive,
                    idle,
                    stall: if ch.stream_stall.is_zero() {
                        cfg.timeouts.stream_stall
                    } else {
                        ch.stream_stall
                    },
                };
                let body = stream::commit(*primed, times, Box::new(obs), resumer);
                respond(status, headers, body, cfg.debug_headers, &route)
            }
            Answer::Passthrough {
                status,
                headers,
                head,
                body,
            } => {
                let obs = LogObserver::new(fin, st.clone(), model, status);
                let body = passthrough::commit(head, *body, idle, Box::new(obs));
                respond(status, headers, body, cfg.debug_headers, &route)
            }
            Answer::Full {
                status,
                headers,
                body,
                usage,
            } => {
                if cx.is_task && cx.method == Method::POST {
                    task::bind_from_body(gw, &cx.client.name, &ch.name, &body);
                }
                if let Some(t) = fin.trace.as_mut().filter(|t| t.sampled()) {
                    // R20.1: `gen_ai.response.finish_reasons` (sampled requests only).
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) {
                        crate::relay::trace::finish_reasons(&v, |r| t.finish_reason(r));
                    }
                }
                fin.done(st, model, status, usage, None);
                let body = ResponseBody::full(body);
                respond(status, headers, body, cfg.debug_headers, &route)
            }
        }
    }

    /// Bookkeeping of a successful attempt: the attempt record, upstream latency, the
    /// affinity binding (written only after a success, R8.3) and the target's visit.
    fn succeeded(&mut self, step: &Step, status: u16, t0: Instant) {
        let ch = self.channel(step);
        let st = &self.cx.snap.states[step.channel];
        let facts = OutcomeFacts::succeeded(status);
        let elapsed = crate::clock::elapsed(t0);
        self.fin.record(
            ch,
            st,
            step.key_index,
            &step.upstream_model,
            &facts,
            elapsed,
        );
        st.metrics.attempts_success.increment(1);
        st.metrics.upstream_duration.record(elapsed.as_secs_f64());
        if let Some(s) = &self.planned.sticky {
            self.fin.fallback(s.succeeded(&self.gw.bindings, &ch.name));
        }
        self.visits
            .attempt(step.channel, step.key_index, &facts, elapsed);
        self.flush_lost();
    }
}
