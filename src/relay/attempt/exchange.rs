//! One upstream exchange: build the request for a step, send it within the header gate, and
//! turn the response into either an answer for the client or a classified failure (R9.2–R9.7).

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, Response};
use tokio::time::{timeout_at, Instant};

use crate::config::model::{Channel, Config};
use crate::relay::answer::floor::Floor;
use crate::relay::answer::stream::{self, Primed};
use crate::relay::answer::whole;
use crate::relay::attempt::compat;
use crate::relay::attempt::translated::{self, Xlate};
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::routing::family::PathFamily;
use crate::routing::plan::Step;
use crate::routing::policy::{Outcome, TransportKind};
use crate::upstream::body::{Coding, UpBody};
use crate::upstream::provider::Target;
use crate::upstream::read;
use crate::upstream::request_body::SPLICE_MIN;
use crate::upstream::{self, Outgoing, UpstreamBody};
use crate::wire::usage::Usage;
use crate::wire::{convert, json, request};

/// A failed exchange's upstream answer, kept to relay to the client if nothing succeeds.
pub struct UpstreamFailure {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The answer is in the upstream's format: translated when relayed (R16.1).
    pub translate: Option<Xlate>,
    /// The body is the gateway's, in the client's format, with this status (an untranslatable
    /// request or answer): relayed as it is.
    pub client_status: Option<u16>,
}

impl UpstreamFailure {
    /// The status and body the client gets: `status` (the upstream's after the channel's
    /// mapping), translated into the client's format when the attempt was.
    pub fn for_client(self, status: u16) -> (u16, HeaderMap, Bytes) {
        if let Some(fixed) = self.client_status {
            return (fixed, self.headers, self.body);
        }
        match self.translate {
            None => (status, self.headers, self.body),
            Some(x) => {
                let (status, body) = x.error(status, &self.body);
                (status, translated::json_headers(self.headers), body)
            }
        }
    }
}

/// What one exchange produced. Made and moved once per attempt: boxing the answer would cost
/// an allocation per request to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
pub enum Exchange {
    /// An answer for the client: the attempt succeeded.
    Answer(Answer),
    /// A failure for the classifier, with the upstream answer when there was one.
    Failed {
        outcome: Outcome,
        answer: Option<UpstreamFailure>,
    },
}

/// A successful answer, ready to commit.
pub enum Answer {
    /// A stream that reached its commit point: ready to commit.
    Stream {
        status: u16,
        headers: HeaderMap,
        /// Boxed, as is a pass-through's body: an exchange is moved several times on its
        /// way to its commit, and inline these two made every answer (a short JSON one
        /// included) 488 bytes instead of ~230.
        primed: Box<Primed>,
    },
    /// A complete non-stream success.
    Full {
        status: u16,
        headers: HeaderMap,
        body: Bytes,
        usage: Usage,
    },
    /// A non-SSE body to stream through (not JSON, or JSON too large to inspect): `head` is
    /// what was read, the rest follows from `body`.
    Passthrough {
        status: u16,
        headers: HeaderMap,
        head: Bytes,
        body: Box<UpBody>,
    },
}

impl Answer {
    pub fn status(&self) -> u16 {
        match self {
            Answer::Stream { status, .. }
            | Answer::Full { status, .. }
            | Answer::Passthrough { status, .. } => *status,
        }
    }
}

/// Per-exchange knobs computed by the loop.
pub struct Gates {
    /// Response headers of a streaming request (R9.2).
    pub header_timeout: std::time::Duration,
    /// A bound on a non-stream request's wait for headers below its non-stream timeout
    /// (`timeouts.image_upstream_header` for images).
    pub non_stream_header_cap: Option<std::time::Duration>,
    pub deadline: Instant,
    /// The Idempotency-Key this exchange carries (R10.2): the client's, or one derived for
    /// the target.
    pub idempotency_key: Option<http::HeaderValue>,
    /// The attempt's W3C `traceparent` (R20.1; `None` without `telemetry.otlp`).
    pub traceparent: Option<http::HeaderValue>,
}

impl Gates {
    /// The gates of one attempt of a request of `family` before `deadline`: images wait
    /// `timeouts.image_upstream_header` for headers, streamed or not; every other request
    /// waits `timeouts.upstream_header` when streamed.
    pub fn of(
        cfg: &Config,
        family: PathFamily,
        deadline: Instant,
        idempotency_key: Option<http::HeaderValue>,
    ) -> Gates {
        let (header_timeout, non_stream_header_cap) = if family == PathFamily::Images {
            let image_timeout = cfg.timeouts.image_upstream_header;
            (image_timeout, Some(image_timeout))
        } else {
            (cfg.timeouts.upstream_header, None)
        };
        Gates {
            header_timeout,
            non_stream_header_cap,
            deadline,
            idempotency_key,
            traceparent: None,
        }
    }
}

/// The non-stream timeout of `ch` (R9.7): its own value, or the global one when 0.
pub fn non_stream_timeout(cfg: &Config, ch: &Channel) -> std::time::Duration {
    if ch.non_stream_timeout.is_zero() {
        cfg.timeouts.non_stream
    } else {
        ch.non_stream_timeout
    }
}

/// One exchange with the upstream of a prepared step: send the request within its gate, and
/// read the answer. A Responses request that finds the channel without `/v1/responses`
/// (B-responses-discovery, `translated::discovers`) marks it chat-only and is sent again at once,
/// translated, to the same channel and key: one exchange, so the 404 counts as nothing.
pub async fn exchange(
    gw: &Gateway,
    cx: &Context,
    step: &Step,
    ch: &Channel,
    g: &Gates,
    p: Prepared,
) -> Exchange {
    let native = p.tr.is_none();
    let ex = send_prepared(gw, cx, ch, g, p).await;
    if native && &*cx.path == "/v1/responses" && translated::discovers(ch) && no_path(&ex) {
        let st = &cx.snap.states[step.channel];
        st.responses_path.mark(Instant::now());
        return match prepare(cx, step, ch, g) {
            Ok(p) => send_prepared(gw, cx, ch, g, p).await,
            Err(Unprepared::Failed(e)) => *e,
            Err(Unprepared::Skip(r)) => Exchange::Failed {
                answer: Some(r.failure(HeaderMap::new())),
                outcome: r.outcome,
            },
        };
    }
    ex
}

/// A 404 that names no model: the upstream has no such path.
fn no_path(ex: &Exchange) -> bool {
    match ex {
        Exchange::Failed { outcome, .. } => {
            matches!(outcome, Outcome::Status { code: 404, .. })
                && !crate::state::models::is_model_not_found(outcome)
        }
        Exchange::Answer(_) => false,
    }
}

/// Send a prepared request and read its answer.
async fn send_prepared(
    gw: &Gateway,
    cx: &Context,
    ch: &Channel,
    g: &Gates,
    p: Prepared,
) -> Exchange {
    let Prepared { plan, tr, req } = p;
    let sent = crate::clock::fresh();
    let t_ns = (sent + non_stream_timeout(&cx.snap.table.config, ch)).min(g.deadline);
    let idle = non_stream_timeout(&cx.snap.table.config, ch);
    match send(gw, ch, req, plan.upstream_stream, g, t_ns).await {
        Ok(resp) => receive(cx, &plan, tr, resp, (t_ns, idle), g).await,
        Err(o) => failed(o),
    }
}

/// A step's upstream request, ready to send.
pub struct Prepared {
    plan: convert::Plan,
    tr: Option<Translation>,
    req: Request<UpstreamBody>,
}

/// A step that cannot be sent.
pub enum Unprepared {
    /// The translation into the channel's format would change the request's meaning
    /// (R16.1): a local skip — no upstream contact, nothing for breakers, cooldowns or the
    /// retry budget; the refusal (the client's 400) is the answer only if no target serves.
    Skip(Box<translated::Refused>),
    /// The request cannot be built for this channel (a `channel:*` failure, R7.1).
    Failed(Box<Exchange>),
}

/// The attempt's translation (R16.1): the request as the channel's format has it.
struct Translation {
    x: Xlate,
    /// The stream carries the usage chunk (OpenAI clients).
    include_usage: bool,
}

/// The edits of the client's body for one attempt: `model` rewritten to the upstream
/// model and, sent natively on a channel that takes `max_completion_tokens`, its
/// `max_tokens` key renamed, both at the spans the request's one parse found. Everything
/// else is kept byte for byte.
#[derive(Default)]
struct Edits {
    model: Option<((usize, usize), String)>,
    renamed_key: Option<(usize, usize)>,
}

impl Edits {
    fn is_empty(&self) -> bool {
        self.model.is_none() && self.renamed_key.is_none()
    }

    /// The spans and their replacements.
    fn list(&self) -> ([json::Edit<'_>; 2], usize) {
        let mut edits: [json::Edit<'_>; 2] = [((0, 0), b""); 2];
        let mut n = 0;
        if let Some((span, quoted)) = &self.model {
            edits[n] = (*span, quoted.as_bytes());
            n += 1;
        }
        if let Some(key) = self.renamed_key {
            edits[n] = (key, compat::RENAMED_KEY);
            n += 1;
        }
        (edits, n)
    }

    /// The edited body in one new buffer (`None` when nothing changes: the client's body
    /// as it is), for the steps that read or edit it further.
    fn copied(&self, body: &Bytes) -> Option<Bytes> {
        let (mut edits, n) = self.list();
        (n > 0).then(|| json::splice_all(body, &mut edits[..n]))
    }

    /// The edited body as the client's bytes around the replaced ones (no copy).
    fn by_reference(&self, body: &Bytes) -> UpstreamBody {
        let (mut edits, n) = self.list();
        UpstreamBody::spliced(body, &mut edits[..n])
    }
}

/// The attempt's [`Edits`] of the client's body, and `true` when the `max_tokens` question
/// is settled here (`compat::native_body` need not read the body for it).
fn edited(cx: &Context, step: &Step, ch: &Channel, model: &str, native: bool) -> (Edits, bool) {
    let Some(p) = &cx.peek else {
        return (Edits::default(), false);
    };
    let model_edit = match &*step.upstream_model {
        "" => None,
        up => request::model_edit(p, up),
    };
    let mut edits = Edits {
        model: model_edit,
        renamed_key: None,
    };
    let renamed = match native.then(|| compat::max_tokens_rename(cx.family, p, ch, model)) {
        Some(Ok(Some(key))) => {
            edits.renamed_key = Some(key);
            true
        }
        Some(Ok(None)) => true,
        Some(Err(())) | None => false,
    };
    (edits, renamed)
}

/// Whether a large body whose only changes are `edits` goes out by reference: nothing
/// after them reads or edits it (sent natively with the `max_tokens` question settled, no
/// output bound to add, the stream plan keeping it).
fn by_reference(cx: &Context, ch: &Channel, edits: &Edits, native: bool, renamed: bool) -> bool {
    !edits.is_empty()
        && cx.body.len() >= SPLICE_MIN
        && native
        && renamed
        && crate::relay::attempt::estimate::output_bound(cx).is_none()
        && convert::keeps_body(ch.stream_policy, &cx.path, cx.peek.as_ref())
}

/// The request side: the body this channel gets — `model` rewritten to the upstream model,
/// the stream policy applied (R9.6), translated into the channel's format when it speaks
/// another (R16.1) — and the upstream request built from it. An unbuildable request is the
/// channel's failure; an untranslatable one a local skip of this target. The translation is
/// the attempt's: by kind, and for Responses by the channel's mode and what it was found to
/// serve (`translated::of_attempt`).
pub fn prepare(cx: &Context, step: &Step, ch: &Channel, g: &Gates) -> Result<Prepared, Unprepared> {
    let st = &cx.snap.states[step.channel];
    let translator = translated::of_attempt(cx.family, ch, st, crate::clock::instant());
    let model = match &*step.upstream_model {
        "" => cx.model(),
        m => m,
    };
    let (edits, renamed) = edited(cx, step, ch, model, translator.is_none());
    let spliced = by_reference(cx, ch, &edits, translator.is_none(), renamed)
        .then(|| edits.by_reference(&cx.body));
    let body = match spliced {
        // Not read again: the plan keeps it as it is (checked above).
        Some(_) => Some(Bytes::new()),
        None => edits.copied(&cx.body),
    };
    // The output bound is written under the field this channel takes, so the native
    // rewrite below has nothing to rename (and never parses the body again).
    let bounded = crate::relay::attempt::estimate::bound_output(
        cx,
        body.as_ref().unwrap_or(&cx.body),
        || match translator {
            None => crate::relay::attempt::compat::chat_output_field(ch, model),
            Some(_) => "max_tokens",
        },
    );
    // The client's body is shared (cloned) only when it goes out unchanged.
    let body = bounded.or(body).unwrap_or_else(|| cx.body.clone());
    let body = match translator {
        None if !renamed => crate::relay::attempt::compat::native_body(cx.family, ch, model, body),
        _ => body,
    };
    // A translated OpenAI stream needs its usage chunk for billing (hidden unless asked).
    let include_usage = ch.include_usage || translator.is_some();
    let mut plan = convert::plan_with(
        ch.stream_policy,
        include_usage,
        &cx.path,
        cx.peek.as_ref(),
        body,
    );
    let (mut path, mut stream, mut tr) = (cx.path_and_query(), plan.upstream_stream, None);
    if let Some(translator) = translator {
        let prepared = translator
            .request(&plan.body, model, ch)
            .map_err(Unprepared::Skip)?;
        plan.body = prepared.body;
        (path, stream) = (translator.upstream_path(), prepared.stream);
        tr = Some(Translation {
            x: translator,
            include_usage: prepared.include_usage,
        });
    }
    let req = upstream::build(Outgoing {
        channel: ch,
        key: ch.keys.get(step.key_index),
        method: cx.method.clone(),
        path_and_query: path,
        target: Target {
            model,
            stream,
            api_version: "",
        },
        client_headers: &cx.headers,
        // The plan's body is not read again: moved, not shared (a share costs an allocation).
        body: spliced.unwrap_or_else(|| std::mem::take(&mut plan.body).into()),
        idempotency_key: g.idempotency_key.as_ref(),
        traceparent: g.traceparent.as_ref(),
        request_id: &cx.request_id,
    })
    .map_err(|e| Unprepared::Failed(Box::new(failed(Outcome::ChannelError(e.code)))))?;
    Ok(Prepared { plan, tr, req })
}

/// Send within the gate of the request kind. Seed 001: the header gate is for streaming
/// requests. A non-stream answer sends its headers when generation is done, so its whole
/// exchange — send to last byte — is governed by the non-stream timeout `t_ns` (R9.7),
/// capped by the request deadline.
async fn send(
    gw: &Gateway,
    ch: &Channel,
    req: Request<UpstreamBody>,
    upstream_stream: bool,
    g: &Gates,
    t_ns: Instant,
) -> Result<Response<UpBody>, Outcome> {
    let sent = crate::clock::fresh();
    let (gate, timeout_kind) = if upstream_stream {
        (sent + g.header_timeout, TransportKind::HeaderTimeout)
    } else {
        let cap = g.non_stream_header_cap.map_or(t_ns, |c| t_ns.min(sent + c));
        let kind = if cap < t_ns {
            TransportKind::HeaderTimeout
        } else {
            TransportKind::BodyTimeout
        };
        (cap, kind)
    };
    let gate = gate.min(g.deadline);
    match timeout_at(gate, gw.upstream.send_for(ch, req)).await {
        Err(_) if gate == g.deadline => Err(Outcome::DeadlineExceeded),
        Err(_) => Err(Outcome::Transport(timeout_kind)),
        Ok(Err(kind)) => Err(Outcome::Transport(kind)),
        Ok(Ok(r)) => Ok(r),
    }
}

/// The answer side: an error status is a failure carrying the answer; an answer empty by
/// definition is a success (R9.5); SSE is primed to its commit point; JSON is read whole;
/// anything else (or a body in a coding that cannot be read) passes through.
async fn receive(
    cx: &Context,
    plan: &convert::Plan,
    tr: Option<Translation>,
    resp: Response<UpBody>,
    (t_ns, idle): (Instant, std::time::Duration),
    g: &Gates,
) -> Exchange {
    let translator = tr.as_ref().map(|t| t.x);
    let (mut parts, mut inc) = resp.into_parts();
    let status = parts.status.as_u16();
    let coding = Coding::of(&parts.headers);
    if coding == Coding::Gzip {
        inc.gunzip();
        parts.headers.remove(header::CONTENT_ENCODING);
        parts.headers.remove(header::CONTENT_LENGTH);
    }
    if !(200..300).contains(&status) {
        let body = read::read_error(&mut inc, g.deadline).await;
        return upstream_failed(status, parts.headers, body, translator);
    }
    if matches!(status, 204 | 205) || cx.method == Method::HEAD {
        return Exchange::Answer(Answer::Full {
            status,
            headers: parts.headers,
            body: Bytes::new(),
            usage: Usage::default(),
        });
    }
    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let inspectable = coding != Coding::Other;
    if is_sse && inspectable {
        if let Some(t) = &tr {
            inc.transform(t.x.stream(t.include_usage, cx.rid()));
        }
        return stream(cx, plan, status, parts.headers, inc, (t_ns, idle), g).await;
    }
    if inspectable && read::is_json(&parts.headers) {
        return whole::whole(cx, plan, translator, status, parts.headers, inc, t_ns).await;
    }
    if translator.is_some() {
        // Neither SSE nor JSON: nothing the client's format can carry.
        return failed(translated::untranslatable());
    }
    match read::first_chunk(&mut inc, t_ns).await {
        Err(kind) => failed(Outcome::Transport(kind)),
        Ok(None) => failed(Outcome::Transport(TransportKind::EmptyBody)),
        Ok(Some(head)) => Exchange::Answer(Answer::Passthrough {
            status,
            headers: parts.headers,
            head,
            body: Box::new(inc),
        }),
    }
}

/// A failure with the upstream's answer, kept to relay if nothing succeeds; classified on
/// the upstream's own status and body, translated only when relayed.
pub(in crate::relay) fn upstream_failed(
    status: u16,
    headers: HeaderMap,
    body: Bytes,
    x: Option<Xlate>,
) -> Exchange {
    Exchange::Failed {
        outcome: stream::status_outcome(status, &body),
        answer: Some(UpstreamFailure {
            status,
            headers,
            body,
            translate: x,
            client_status: None,
        }),
    }
}

/// An SSE answer: prime it to its commit point, then relay it or assemble it (R9.6).
#[allow(clippy::too_many_arguments)]
async fn stream(
    cx: &Context,
    plan: &convert::Plan,
    status: u16,
    headers: HeaderMap,
    inc: UpBody,
    (t_ns, idle): (Instant, std::time::Duration),
    g: &Gates,
) -> Exchange {
    let timeouts = &cx.snap.table.config.timeouts;
    let gates = (timeouts.first_byte, idle);
    let floor = Floor::new(timeouts.min_tokens_per_second, cx.stream_format);
    let mut primed = match stream::prime(inc, cx.stream_format, gates, g.deadline, floor).await {
        Ok(p) => p,
        Err(o) => return failed(o),
    };
    if let (convert::Mode::Assemble, Some(d)) = (plan.mode, plan.dialect) {
        return match stream::assemble(primed, d, t_ns).await {
            Ok((body, usage)) => Exchange::Answer(Answer::Full {
                status,
                headers: convert::with_content_type(headers, false),
                body,
                usage,
            }),
            Err(o) => failed(o),
        };
    }
    if plan.hide_usage_chunk {
        primed.hide_usage_chunk();
    }
    Exchange::Answer(Answer::Stream {
        status,
        headers,
        primed: Box::new(primed),
    })
}

pub(in crate::relay) fn failed(outcome: Outcome) -> Exchange {
    Exchange::Failed {
        outcome,
        answer: None,
    }
}
