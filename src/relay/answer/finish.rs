//! The end of a request: the attempt chain, the request-log record (R4.6, R12.1) and the
//! per-request metrics, for full answers and for streams when they end.

use std::sync::Arc;

use std::time::Duration;

use crate::clock::now_ms;
use crate::config::model::Channel;
use crate::relay::answer::stream::{StreamEnd, StreamObserver};
use crate::relay::attempt::translated;
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::relay::trace::{self, Attempt, Trace};
use crate::routing::outcome::OutcomeFacts;
use crate::state::ChannelState;
use crate::store::{AttemptRecord, RequestRecord, Store, WriteOp};
use crate::telemetry;
use crate::wire::sse::Event;
use crate::wire::usage::{StreamUsage, Usage};

/// A request's record in the making.
pub struct Finish {
    store: Store,
    metrics: Arc<telemetry::RequestMetrics>,
    rec: RequestRecord,
    started: std::time::Instant,
    /// Size of the client's request body (usage estimates, R9.8).
    request_bytes: usize,
    attempts: Vec<AttemptRecord>,
    /// Settled in `done`, refunded in `failed` (R11.1).
    pub billing: Option<crate::billing::Session>,
    /// Rate-limit holds (R15), to the end (stream included): settled to actual usage in
    /// `done`, released on every other exit.
    pub limit: crate::relay::attempt::holds::LimitHolds,
    /// The record went to the request log (by `done` or `failed`).
    written: bool,
    /// Attempts on a channel of another wire format are translated (R16.2).
    family: crate::routing::family::PathFamily,
    /// The request's trace when `telemetry.otlp` is on (R20.1).
    /// Boxed: off by default, and inline it would make every request's `Finish` (moved
    /// into the stream's observer) ~280 bytes larger.
    pub trace: Option<Box<Trace>>,
    /// The next recorded attempt is a stream resume's continuation (R18.2).
    resuming: bool,
    /// Time in upstream attempts before the answer (`switchyard_overhead_seconds`).
    upstream: Duration,
    /// When the answer's head went out (a committed stream or pass-through), from the start.
    answered: Option<Duration>,
}

/// A request dropped before it answered (the client went away before the first byte) is
/// still logged, as 499 `client_cancelled`; its billing session refunds on drop.
impl Drop for Finish {
    fn drop(&mut self) {
        if !self.written {
            self.rec.error_code = Some("client_cancelled".into());
            self.write(499);
        }
    }
}

impl Finish {
    /// In a box: the record travels from the attempt loop into the commit and a stream's
    /// observer, and each move is then a pointer's, not ~1 KB copied.
    pub fn new(gw: &Gateway, job: &Context) -> Box<Finish> {
        let rec = RequestRecord {
            id: job.rid().to_string(),
            ts_ms: now_ms(),
            client: job.client.name.clone(),
            group: job
                .routes
                .first()
                .and_then(|(g, _)| job.group_name(*g).cloned())
                .unwrap_or_default(),
            public_model: job.model_name().cloned().unwrap_or_default(),
            path: job.path.clone(),
            stream: job.wants_stream(),
            upstream_model: Arc::default(),
            attempts: Vec::new(),
            chain: Arc::default(),
            final_status: 0,
            error_code: None,
            sticky_kind: None,
            sticky_hit: None,
            fallback: false,
            failed_over: false,
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            usage_estimated: false,
            stream_outcome: None,
            trace_id: None,
            latency_ms: 0,
        };
        Box::new(Finish {
            store: gw.store.clone(),
            metrics: gw.request_metrics.clone(),
            rec,
            started: job.started,
            request_bytes: job.body.len(),
            attempts: Vec::new(),
            billing: None,
            limit: Default::default(),
            written: false,
            family: job.family,
            trace: Trace::of(job).map(Box::new),
            resuming: false,
            upstream: Duration::ZERO,
            answered: None,
        })
    }

    /// Record one attempt (R4.6): its channel, key index, upstream status, class, latency and
    /// whether it may have been charged.
    pub fn record(
        &mut self,
        ch: &Channel,
        st: &crate::state::ChannelState,
        key_index: usize,
        upstream_model: &str,
        f: &OutcomeFacts,
        elapsed: Duration,
    ) {
        let now = crate::clock::instant();
        let translation = translated::of_attempt(self.family, ch, st, now).map(|x| x.label());
        if self.answered.is_none() {
            self.upstream += elapsed;
        }
        if let Some(t) = &mut self.trace {
            t.attempt(Attempt {
                channel: ch,
                key_index,
                upstream_model,
                facts: f,
                elapsed,
                translation: translation.as_deref(),
                resumed: std::mem::take(&mut self.resuming),
            });
        }
        self.attempts.push(AttemptRecord {
            channel: st.name.clone(),
            key_index: key_index as u32,
            upstream_status: f.upstream_status,
            error_class: f.class.into(),
            latency_ms: elapsed.as_millis() as u64,
            possibly_charged: f.possibly_charged,
            translation,
        });
    }

    /// The `traceparent` the next attempt sends upstream (R20.1); `None` without traces.
    pub fn traceparent(&mut self) -> Option<http::HeaderValue> {
        self.trace.as_mut()?.traceparent()
    }

    /// The channel of the latest attempt ("" before the first).
    pub fn last_channel(&self) -> &str {
        self.attempts.last().map_or("", |a| &*a.channel)
    }

    /// Attempts recorded so far.
    pub fn attempts(&self) -> usize {
        self.attempts.len()
    }

    /// Sticky key kind and whether the bound channel was planned first (R8.6).
    pub fn sticky(&mut self, kind: &str, hit: bool) {
        self.rec.sticky_kind = Some(kind.to_string());
        self.rec.sticky_hit = Some(hit);
    }

    /// A binding existed and another channel answered (R8.6).
    pub fn fallback(&mut self, fallback: bool) {
        self.rec.fallback = fallback;
    }

    /// The attempt chain `a->b->c` (R4.6): one attempt's is its channel's name, shared.
    pub fn chain(&self) -> Arc<str> {
        if let [only] = &self.attempts[..] {
            return only.channel.clone();
        }
        let mut out = String::new();
        for (i, a) in self.attempts.iter().enumerate() {
            if i > 0 {
                out.push_str("->");
            }
            out.push_str(&a.channel);
        }
        out.into()
    }

    /// The gateway's own error code for a request it refused (e.g. `insufficient_quota`).
    pub fn set_error_code(&mut self, code: &str) {
        self.rec.error_code = Some(code.to_string());
    }

    /// Mark the usage passed to `done` as estimated (R9.8).
    pub fn set_usage_estimated(&mut self, estimated: bool) {
        self.rec.usage_estimated = estimated;
    }

    /// A successful answer (or a committed stream that ended).
    pub fn done(
        mut self: Box<Self>,
        channel: &ChannelState,
        upstream_model: Arc<str>,
        status: u16,
        usage: Usage,
        stream_outcome: Option<&'static str>,
    ) {
        if let Some(b) = self.billing.take() {
            b.settle(&usage);
        }
        self.limit.settle(&usage, true);
        if !usage.is_zero() {
            channel.metrics.prompt_tokens.increment(usage.prompt_tokens);
            channel.metrics.cached_tokens.increment(usage.cached_tokens);
        }
        channel
            .recent
            .latency(crate::clock::elapsed_std(self.started));
        self.rec.upstream_model = upstream_model;
        self.rec.prompt_tokens = usage.prompt_tokens;
        self.rec.completion_tokens = usage.completion_tokens;
        self.rec.cached_tokens = usage.cached_tokens;
        self.rec.stream_outcome = stream_outcome.map(std::borrow::Cow::Borrowed);
        if let Some(t) = &mut self.trace {
            t.usage(&usage);
        }
        self.write(status);
    }

    /// Every attempt failed (or none could be made).
    pub fn failed(mut self: Box<Self>, status: u16) {
        if let Some(b) = self.billing.take() {
            b.refund();
        }
        let reached = !self.attempts.is_empty();
        self.limit.settle(&Usage::default(), reached);
        self.write(status);
    }

    fn write(&mut self, status: u16) {
        self.written = true;
        let latency = crate::clock::elapsed_std(self.started);
        self.rec.chain = self.chain();
        self.rec.final_status = status;
        self.rec.latency_ms = latency.as_millis() as u64;
        let n = self.attempts.len();
        self.rec.attempts = std::mem::take(&mut self.attempts);
        let trace = self.trace.take();
        self.rec.trace_id = trace.as_ref().map(|t| t.trace_id());
        // R12.4: one line per request; failures at info, successes at debug (hot path).
        let record = &self.rec;
        let trace_id = record.trace_id.as_deref().unwrap_or_default();
        if (200..300).contains(&status) {
            tracing::debug!(request_id = %record.id, trace_id = %trace_id, client = %record.client,
                model = %record.public_model, chain = %record.chain, status, latency_ms = record.latency_ms,
                "request finished");
        } else {
            tracing::info!(request_id = %record.id, trace_id = %trace_id, client = %record.client,
                model = %record.public_model, chain = %record.chain, status, latency_ms = record.latency_ms,
                "request failed");
        }
        if let (Some(t), Some(traces)) = (trace, self.metrics.traces.get()) {
            (*t).submit(traces, record);
        }
        self.metrics.requests(status).increment(1);
        self.metrics.duration.record(latency.as_secs_f64());
        let answered = self.answered.unwrap_or(latency);
        let overhead = answered.saturating_sub(self.upstream);
        self.metrics.overhead.record(overhead.as_secs_f64());
        self.metrics.attempts_per_request.record(n as f64);
        let tokens = record
            .prompt_tokens
            .saturating_add(record.completion_tokens);
        let ok = (200..300).contains(&status);
        self.metrics.clients.record(&record.client, ok, tokens);
        let rec = std::mem::take(&mut self.rec);
        self.store.try_send(WriteOp::RequestLog(Box::new(rec)));
    }
}

/// A request the gateway refused before any upstream attempt (400, 401, 404, 413, 426, …).
pub struct Rejected<'a> {
    pub request_id: &'a str,
    /// The authenticated client, or "" when authentication is what failed.
    pub client: &'a str,
    pub model: &'a str,
    /// The path without its query string (which may carry credentials).
    pub path: &'a str,
    pub status: u16,
    pub code: &'a str,
    pub started: std::time::Instant,
}

/// Count, log (one line, no secrets) and write to the request log a refused request, like
/// any other request (R12.1). Client-chosen strings are cut to a bounded length.
pub fn rejected(gw: &Gateway, r: Rejected<'_>) {
    let latency = crate::clock::elapsed_std(r.started);
    let latency_ms = latency.as_millis() as u64;
    let model = bounded(r.model, 128);
    let path = bounded(r.path, 256);
    tracing::info!(request_id = %r.request_id, client = %r.client, model = %model, path = %path,
        status = r.status, code = %r.code, latency_ms, "request rejected");
    gw.request_metrics.requests(r.status).increment(1);
    gw.request_metrics.duration.record(latency.as_secs_f64());
    gw.request_metrics.overhead.record(latency.as_secs_f64());
    let rec = RequestRecord {
        id: r.request_id.to_string(),
        ts_ms: now_ms(),
        client: r.client.into(),
        public_model: model.into(),
        path: crate::http::path::shared(path),
        final_status: r.status,
        error_code: Some(r.code.to_string()),
        latency_ms,
        ..RequestRecord::default()
    };
    gw.store.try_send(WriteOp::RequestLog(Box::new(rec)));
}

fn bounded(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Watches a committed stream: usage, keepalives, outcome; writes the log when it ends.
pub struct LogObserver {
    fin: Box<Finish>,
    channel: Arc<ChannelState>,
    upstream_model: Arc<str>,
    status: u16,
    usage: StreamUsage,
    /// Size of the client's request body, for estimating unreported prompt tokens (R9.8).
    request_bytes: usize,
    /// The usage of the attempts before a resume (R18.2: the upstreams billed each), and
    /// whether any of it was estimated.
    carried: Option<(Usage, bool)>,
}

impl LogObserver {
    pub fn new(
        fin: Box<Finish>,
        channel: Arc<ChannelState>,
        upstream_model: Arc<str>,
        status: u16,
    ) -> Self {
        let ttfb = crate::clock::elapsed_std(fin.started);
        fin.metrics.ttfb.record(ttfb.as_secs_f64());
        let mut fin = fin;
        fin.answered = Some(ttfb);
        if let Some(t) = &mut fin.trace {
            t.ttfb(ttfb);
        }
        LogObserver {
            request_bytes: fin.request_bytes,
            fin,
            channel,
            upstream_model,
            status,
            usage: StreamUsage::default(),
            carried: None,
        }
    }
}

impl StreamObserver for LogObserver {
    fn event(&mut self, ev: &Event) {
        self.usage.observe(ev);
        if let Some(t) = &mut self.fin.trace {
            if let Some(v) = ev.json() {
                trace::finish_reasons(v, |r| t.finish_reason(r));
            }
        }
    }

    fn keepalive(&mut self) {
        metrics::counter!(telemetry::KEEPALIVES).increment(1);
    }

    /// R18.2: the cut attempt's usage is kept (settled as a cut stream's), the
    /// continuation is recorded as the next attempt and observed from zero.
    fn resumed(&mut self, c: &crate::relay::answer::resume::Continued) {
        let (u, est) = std::mem::take(&mut self.usage).settle(self.request_bytes);
        let (sum, any) = self.carried.unwrap_or_default();
        self.carried = Some((sum.plus(u), any || est));
        let snap = &c.snap;
        if let (Some(ch), Some(st)) = (
            snap.table.channels.get(c.channel),
            snap.states.get(c.channel),
        ) {
            let facts = OutcomeFacts::succeeded(self.status);
            self.fin.resuming = true;
            if let (Some(t), Some(s)) = (&mut self.fin.trace, c.span) {
                t.set_pending(s);
            }
            let model = c.upstream_model.clone();
            self.fin.record(
                ch,
                st,
                c.key_index,
                &model,
                &facts,
                crate::clock::elapsed(c.sent),
            );
            self.channel = st.clone();
        }
        self.upstream_model = c.upstream_model.clone();
    }

    fn end(self: Box<Self>, end: StreamEnd) {
        self.fin.metrics.stream_ended(end.label());
        let mut s = *self;
        let (usage, estimated) = s.usage.settle(s.request_bytes);
        let (usage, estimated, label) = match s.carried {
            Some((before, est)) => {
                let label = match end {
                    StreamEnd::Complete => "resumed",
                    other => other.label(),
                };
                (before.plus(usage), estimated || est, label)
            }
            None => (usage, estimated, end.label()),
        };
        s.fin.set_usage_estimated(estimated);
        s.fin
            .done(&s.channel, s.upstream_model, s.status, usage, Some(label));
    }
}
