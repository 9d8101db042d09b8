//! A streamed answer: primed up to its commit point within the first-byte gate, then
//! committed and pumped to the client event by event — or, under `force_stream`, read to its
//! end and assembled (R9.1–R9.6, R9.8). Also the outcome an upstream error body stands for.
//!
//! Architecture Invariant (commit point, R9.3): a `Primed` stream is the only way to produce a
//! streaming response, and `commit` consumes it: after `commit` the attempt loop has returned,
//! so nothing can be retried once a byte has reached the client.
//!
//! Every event received is relayed, in order, as soon as it is complete, whatever the read
//! boundaries were: the framer is drained before each read and at the end of the upstream,
//! and the events one read completed go to the client in one write.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};

use crate::http::body::{Aborted, Relay, ResponseBody};
use crate::http::pieces::Pieces;
use crate::relay::answer::floor::Floor;
use crate::relay::answer::resume::{Continued, Delivery, Resumer, Splice};
use crate::routing::policy::{Outcome, TransportKind};
use crate::telemetry;
use crate::upstream::body::UpBody;
use crate::wire::convert;
use crate::wire::dialect::{self, ErrorBody, StreamFormat};
use crate::wire::sse::{Event, Framer};
use crate::wire::usage::{StreamUsage, Usage};

/// Turn an upstream error status and body into the classifier's outcome.
pub fn status_outcome(code: u16, body: &[u8]) -> Outcome {
    error_outcome(code, ErrorBody::read(body))
}

/// The outcome of an error status and what its body says.
fn error_outcome(code: u16, e: ErrorBody) -> Outcome {
    Outcome::Status {
        code,
        error_code: e.code,
        error_type: e.kind,
        message: e.message,
    }
}

/// A stream that reached its commit point (its first content-bearing or terminal event) without
/// an error: ready to commit. Only `prime` makes one (its fields are private), and only
/// `commit` (relay to the client) or `assemble` (fold into one JSON answer before anything
/// reached the client) consume it.
pub struct Primed {
    body: UpBody,
    framer: Framer,
    held: Vec<Event>,
    format: StreamFormat,
    hide_usage_chunk: bool,
    /// The upstream body already ended (the framer holds the rest of the stream).
    ended: bool,
}

impl Primed {
    /// Drop the usage-only chat chunk on the way to the client (it was requested upstream on
    /// the client's behalf); its usage is still observed.
    pub fn hide_usage_chunk(&mut self) {
        self.hide_usage_chunk = true;
    }

    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Relay (or hide) one event into `out`: the observer sees it either way. `true`: it
    /// goes to the client.
    fn forward(&self, ev: Event, out: &mut Outbox, obs: &mut dyn StreamObserver) -> bool {
        if dialect::is_malformed(self.format, &ev) {
            metrics::counter!(telemetry::MALFORMED_EVENTS).increment(1);
            return false;
        }
        obs.event(&ev);
        if self.hide_usage_chunk && dialect::is_usage_chunk(&ev) {
            return false;
        }
        out.push(ev.raw);
        true
    }

    /// Read the next upstream chunk into the framer before `deadline`; `Ok(false)` at the end.
    async fn read(&mut self, deadline: Instant) -> Result<(), Option<TransportKind>> {
        match timeout_at(deadline, self.body.frame()).await {
            Err(_) => Err(None),
            Ok(frame) => self.take(frame),
        }
    }

    /// [`Self::read`] timed by the relay's `alarm` (no sleep made and dropped per read).
    async fn read_by(
        &mut self,
        alarm: &mut Alarm,
        wake: Instant,
    ) -> Result<(), Option<TransportKind>> {
        let frame = {
            let mut next = self.body.frame();
            std::future::poll_fn(|cx| {
                if let Poll::Ready(frame) = Pin::new(&mut next).poll(cx) {
                    return Poll::Ready(Some(frame));
                }
                alarm.poll_until(wake, cx).map(|()| None)
            })
            .await
        };
        match frame {
            None => Err(None),
            Some(frame) => self.take(frame),
        }
    }

    /// One upstream frame into the framer: `Err(Some(_))` when the connection broke.
    fn take(
        &mut self,
        frame: Option<Result<http_body::Frame<Bytes>, crate::upstream::body::UpError>>,
    ) -> Result<(), Option<TransportKind>> {
        match frame {
            None => {
                self.framer.finish();
                self.ended = true;
                Ok(())
            }
            Some(Err(_)) => Err(Some(TransportKind::Broken)),
            Some(Ok(frame)) => {
                if let Ok(d) = frame.into_data() {
                    self.framer.push_read(d);
                }
                Ok(())
            }
        }
    }
}

/// A committed stream's one timer for the upstream's silence and the client's keepalive
/// (`pump`): it stays in tokio's wheel across reads and is moved only when it fires before
/// the wake it stands for. That wake only moves later as events come, so a stream costs a
/// wheel move per quiet spell instead of a sleep made, entered and dropped per read
/// (callgrind: ~470 instructions an event). Made at the first wait, for its wake.
#[derive(Default)]
struct Alarm(Option<Pin<Box<tokio::time::Sleep>>>);

impl Alarm {
    /// Ready once `wake` has passed.
    fn poll_until(&mut self, wake: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let sleep = self
            .0
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(wake)));
        if sleep.deadline() > wake {
            sleep.as_mut().reset(wake);
        }
        loop {
            std::task::ready!(sleep.as_mut().poll(cx));
            if Instant::now() >= wake {
                return Poll::Ready(());
            }
            // Fired for an earlier wake: on to this one.
            sleep.as_mut().reset(wake);
        }
    }
}

/// The events bound for the client from one upstream read: written together, in one
/// frame, as soon as the read's complete events are relayed (no added delay), instead of a
/// write per event.
#[derive(Default)]
struct Outbox {
    /// The read's events: the first one's bytes uncopied while it is the only one.
    events: Pieces,
    /// The bytes the read's events may take in all (what the framer held before they were
    /// taken): the events are gathered in a buffer made that large at once instead of
    /// growing event by event.
    room: usize,
    /// The read the events are slices of (`Framer::source`): events relayed unchanged, one
    /// after the other, leave as that read's own bytes, uncopied.
    within: Option<Bytes>,
}

impl Outbox {
    fn push(&mut self, raw: Bytes) {
        self.events
            .push_within(raw, self.within.as_ref(), self.room);
    }

    /// Write what is held to the client; `Err` when the client has left.
    async fn flush(&mut self, tx: &mpsc::Sender<Result<Bytes, Aborted>>) -> Result<(), ()> {
        self.within = None;
        let Some(frame) = self.events.take() else {
            return Ok(());
        };
        tx.send(Ok(frame)).await.map_err(|_| ())
    }
}

/// The failure a pre-commit error event stands for (its data already parsed).
fn event_outcome(code: u16, ev: &Event) -> Outcome {
    let data = ev.data.as_deref().unwrap_or("").as_bytes();
    error_outcome(code, ErrorBody::of(ev.json(), data))
}

/// A stream's framer: a chat stream's takes each event's first look as it frames it
/// (every chat chunk is looked at, through the opening the stream's chunks repeat).
fn framer_for(format: StreamFormat) -> Framer {
    let framer = Framer::new(format.strips_ids());
    match format {
        StreamFormat::Chat => framer.peeking(),
        _ => framer,
    }
}

/// Read up to the commit point: the first content-bearing or terminal event. The preamble
/// (`message_start`, `ping`, `response.created`, …) is held, not relayed, so an error event
/// that follows it is still an ordinary failed attempt (R9.3). From the headers to the commit
/// point every complete event — upstream keepalives included — must come within
/// `first_byte` of the previous one (R9.2); bytes that do not complete an event do not count.
/// Once the opening has arrived (a preamble event, or a translated stream's held opening) the
/// upstream has proven alive: from then on the gate is `idle`, the committed stream's idle
/// cut, so a model that reasons silently before its first token is not cut and re-billed
/// elsewhere. Malformed events (`dialect::is_malformed`) are dropped.
///
/// With `floor` on (`timeouts.min_tokens_per_second`) the commit point is the end of its
/// window instead (`relay::floor`): a stream too slow by then fails like a first-byte timeout.
pub async fn prime(
    body: UpBody,
    format: StreamFormat,
    gates: (Duration, Duration),
    deadline: Instant,
    mut floor: Floor,
) -> Result<Primed, Outcome> {
    let (first_byte, idle) = gates;
    let mut primed = Primed {
        body,
        framer: framer_for(format),
        held: Vec::new(),
        format,
        hide_usage_chunk: false,
        ended: false,
    };
    let mut gate = (Instant::now() + first_byte).min(deadline);
    let mut opened = false;
    loop {
        while let Some(ev) = primed.framer.next_event() {
            opened |= !ev.comment_only || dialect::is_opening_comment(&ev);
            let wait = if opened {
                idle.max(first_byte)
            } else {
                first_byte
            };
            gate = (Instant::now() + wait).min(deadline);
            if ev.comment_only {
                continue;
            }
            if dialect::is_malformed(format, &ev) {
                metrics::counter!(telemetry::MALFORMED_EVENTS).increment(1);
                continue;
            }
            if let Some(code) = dialect::pre_commit_error(format, &ev) {
                return Err(event_outcome(code, &ev));
            }
            let content = !dialect::is_preamble(format, &ev);
            let terminal = content && dialect::is_terminal(format, &ev);
            primed.held.push(ev);
            if content && floor.commits(terminal, Instant::now()) {
                return Ok(primed);
            }
        }
        if primed.ended {
            let kind = if primed.held.is_empty() {
                TransportKind::EmptyBody
            } else {
                TransportKind::Broken
            };
            return Err(Outcome::Transport(kind));
        }
        if primed.framer.overflowed() {
            return Err(Outcome::Transport(TransportKind::Broken));
        }
        let gate = floor.gate(gate);
        match primed.read(gate).await {
            Ok(()) => {}
            Err(Some(kind)) => return Err(Outcome::Transport(kind)),
            Err(None) if gate == deadline => return Err(Outcome::DeadlineExceeded),
            Err(None) if floor.ends_at(gate) => {
                metrics::counter!(telemetry::STREAMS, "outcome" => "below_min_tokens_per_second")
                    .increment(1);
                return Err(Outcome::Transport(TransportKind::FirstByteTimeout));
            }
            Err(None) => {
                metrics::counter!(telemetry::STREAMS, "outcome" => "first_byte_timeout")
                    .increment(1);
                return Err(Outcome::Transport(TransportKind::FirstByteTimeout));
            }
        }
    }
}

/// How a committed stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    Complete,
    Incomplete,
    ClientCancel,
}

impl StreamEnd {
    pub fn label(self) -> &'static str {
        match self {
            StreamEnd::Complete => "complete",
            StreamEnd::Incomplete => "incomplete",
            StreamEnd::ClientCancel => "client_cancel",
        }
    }
}

/// Observes every relayed event (usage extraction) and hears how the stream ended.
pub trait StreamObserver: Send + 'static {
    fn event(&mut self, ev: &Event);
    fn keepalive(&mut self) {}
    /// The stream was cut and goes on with the continuation `c` (R18.2).
    fn resumed(&mut self, _c: &Continued) {}
    fn end(self: Box<Self>, end: StreamEnd);
}

/// Timing of a committed stream.
pub struct RelayTimes {
    pub keepalive: Duration,
    /// A committed stream silent (not even a comment) for this long is cut.
    pub idle: Duration,
    /// `timeouts.stream_stall`: a committed stream whose upstream sends nothing (no event,
    /// no ping, no comment) for this long has stalled and is cut like a broken one; zero =
    /// only `idle` applies. Keepalives to the client go on only while the upstream is alive.
    pub stall: Duration,
}

impl RelayTimes {
    /// The upstream silence that ends a committed stream, and what the cut says.
    fn silence(&self) -> (Duration, &'static str) {
        if !self.stall.is_zero() && self.stall < self.idle {
            (self.stall, "upstream stalled")
        } else {
            (self.idle, "upstream went silent")
        }
    }
}

/// Commit: start relaying `p` to the client and return the client body (R9.1, R9.3). With
/// `resume` (R18.2) a cut of a text stream is continued on the next target.
pub fn commit(
    p: Primed,
    times: RelayTimes,
    observer: Box<dyn StreamObserver>,
    resume: Option<Resumer>,
) -> ResponseBody {
    let (tx, rx) = mpsc::channel(16);
    // The guard exists before the relay's first poll: a body dropped unpolled (the client
    // left first) still tells the observer.
    Relay::body(rx, relay(p, times, tx, Ending(Some(observer)), resume))
}

/// The observer of a relay, told how the stream ended: by the relay when it ends, or as a
/// client cancel when the relay is dropped first (the client left and its connection
/// dropped the body that drives the relay).
struct Ending(Option<Box<dyn StreamObserver>>);

impl Ending {
    fn end(mut self, end: StreamEnd) {
        if let Some(obs) = self.0.take() {
            obs.end(end);
        }
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        if let Some(obs) = self.0.take() {
            obs.end(StreamEnd::ClientCancel);
        }
    }
}

/// The relay of a committed stream. Not an `async fn`: its future captures each value once
/// (an `async fn` keeps its arguments beside the locals it moves them into, ~1.4 KB more per
/// held stream here).
fn relay(
    mut p: Primed,
    times: RelayTimes,
    tx: mpsc::Sender<Result<Bytes, Aborted>>,
    mut ending: Ending,
    resumer: Option<Resumer>,
) -> impl Future<Output = ()> + Send {
    let mut resume = resumer.map(|resumer| Resume {
        resumer,
        delivery: Delivery::new(),
        splice: None,
        error: None,
    });
    async move {
        let end = match ending.0.as_mut() {
            Some(obs) => pump(&mut p, &times, &tx, obs.as_mut(), &mut resume).await,
            None => StreamEnd::ClientCancel,
        };
        let Primed { body, .. } = p;
        if end == StreamEnd::Complete {
            // Perhaps ended at its last event, before the upstream's end of body: that is
            // read off so the upstream connection can be reused.
            body.drain();
        } else {
            // Dropping the upstream body closes the upstream connection at once (R9.8).
            drop(body);
        }
        ending.end(end);
    }
}

/// A committed stream's resume state: the resumer, what reached the client, and the splice
/// of the current continuation.
struct Resume {
    resumer: Resumer,
    delivery: Delivery,
    splice: Option<Splice>,
    /// An error event after content, held back while a resume may still replace it.
    error: Option<Event>,
}

/// Relay one upstream event through the current splice into `out`; `true`: it goes to the
/// client.
fn relay_one(
    p: &Primed,
    ev: Event,
    out: &mut Outbox,
    obs: &mut dyn StreamObserver,
    resume: &mut Option<Resume>,
    seen: &mut Seen,
) -> bool {
    let ev = match resume.as_mut().and_then(|r| r.splice.as_mut()) {
        Some(s) => match s.rewrite(ev.clone()) {
            Some(e) => e,
            None => {
                obs.event(&ev); // the continuation's opening still carries its usage
                return false;
            }
        },
        None => ev,
    };
    if let Some(r) = resume.as_mut() {
        if r.delivery.resumable() && dialect::pre_commit_error(p.format, &ev).is_some() {
            r.error = Some(ev); // a cut that says why: resumed, or relayed at the end
            return false;
        }
    }
    seen.terminal |= dialect::is_terminal(p.format, &ev);
    seen.last |= dialect::is_last(p.format, &ev);
    if let Some(r) = resume.as_mut() {
        r.delivery.observe(p.format, &ev);
    }
    p.forward(ev, out, obs)
}

/// What the relay has seen of the stream's end: its terminal event (R9.4), and its last
/// event, after which the client's body ends without waiting for the upstream's end.
#[derive(Default)]
struct Seen {
    terminal: bool,
    last: bool,
}

/// The error event held back by `relay_one`, if any.
fn held_error(resume: &Option<Resume>) -> bool {
    resume.as_ref().is_some_and(|r| r.error.is_some())
}

/// The stream was cut before its terminal event: continue it on the next target when it can
/// be (R18.2); `true` when `p` is now the continuation.
async fn try_resume(
    p: &mut Primed,
    resume: &mut Option<Resume>,
    obs: &mut dyn StreamObserver,
) -> bool {
    let Some(r) = resume.as_mut() else {
        return false;
    };
    if !r.delivery.resumable() {
        metrics::counter!(telemetry::STREAM_RESUMES, "outcome" => "not_text").increment(1);
        return false;
    }
    let Some(c) = r.resumer.next(&r.delivery.text).await else {
        metrics::counter!(telemetry::STREAM_RESUMES, "outcome" => "no_target").increment(1);
        return false;
    };
    metrics::counter!(telemetry::STREAM_RESUMES, "outcome" => "resumed").increment(1);
    obs.resumed(&c);
    r.splice = Some(Splice::new(p.format, &r.delivery, c.trimmed));
    r.error = None;
    *p = c.primed;
    true
}

async fn pump(
    p: &mut Primed,
    times: &RelayTimes,
    tx: &mpsc::Sender<Result<Bytes, Aborted>>,
    obs: &mut dyn StreamObserver,
    resume: &mut Option<Resume>,
) -> StreamEnd {
    let mut seen = Seen::default();
    let mut out = Outbox::default();
    'segment: loop {
        for ev in std::mem::take(&mut p.held) {
            relay_one(p, ev, &mut out, obs, resume, &mut seen);
        }
        let mut last_upstream = Instant::now();
        let mut last_client = Instant::now();
        let mut alarm = Alarm::default();
        loop {
            // Every complete event is relayed before the next read, in one write.
            let mut sent = false;
            out.room = p.framer.held();
            out.within = p.framer.source();
            while let Some(ev) = p.framer.next_event() {
                if relay_one(p, ev, &mut out, obs, resume, &mut seen) {
                    sent = true;
                } else if held_error(resume) {
                    break;
                }
            }
            if out.flush(tx).await.is_err() {
                return StreamEnd::ClientCancel;
            }
            if seen.last && !held_error(resume) {
                // Nothing more is meant to come: the body ends with this write, not a
                // write later when the upstream's end arrives (`relay` drains the rest).
                return StreamEnd::Complete;
            }
            if sent {
                last_client = Instant::now();
            }
            let (silence, why) = times.silence();
            let cut_why = match cut_reason(p, resume) {
                Some(w) => Some(w),
                None => {
                    let wake = (last_client + times.keepalive).min(last_upstream + silence);
                    // A client that leaves drops the body that drives this relay (and so
                    // the relay itself) wherever it waits: no watch for it is needed here.
                    match p.read_by(&mut alarm, wake).await {
                        Ok(()) => {
                            last_upstream = Instant::now();
                            None
                        }
                        Err(Some(_)) => Some("upstream connection broke"),
                        Err(None) if Instant::now() >= last_upstream + silence => Some(why),
                        Err(None) => {
                            if tx.send(Ok(dialect::keepalive(p.format))).await.is_err() {
                                return StreamEnd::ClientCancel;
                            }
                            obs.keepalive();
                            last_client = Instant::now();
                            None
                        }
                    }
                }
            };
            if let Some(w) = cut_why {
                // Boxed: resuming (rare) dials a new attempt, ~7 KB of future that every
                // stream's relay would carry inline.
                if !seen.terminal && Box::pin(try_resume(p, resume, obs)).await {
                    continue 'segment;
                }
                // Boxed: the cut's future (rare) would otherwise ride in every stream's.
                return Box::pin(end_cut(p, tx, obs, resume, seen.terminal, w)).await;
            }
        }
    }
}

/// Why the stream is cut without a read: an error event held back, the upstream's end, or an
/// event past the framer's bound.
fn cut_reason(p: &Primed, resume: &Option<Resume>) -> Option<&'static str> {
    if held_error(resume) {
        Some("upstream sent an error")
    } else if p.ended {
        Some("upstream closed the stream")
    } else if p.framer.overflowed() {
        Some("upstream event too large")
    } else {
        None
    }
}

/// A cut nothing continued: the upstream's own held-back error goes to the client first, as
/// it would have without resume, then the stream ends.
async fn end_cut(
    p: &Primed,
    tx: &mpsc::Sender<Result<Bytes, Aborted>>,
    obs: &mut dyn StreamObserver,
    resume: &mut Option<Resume>,
    mut terminal: bool,
    why: &str,
) -> StreamEnd {
    if let Some(ev) = resume.as_mut().and_then(|r| r.error.take()) {
        terminal |= dialect::is_terminal(p.format, &ev);
        let mut out = Outbox::default();
        p.forward(ev, &mut out, obs);
        if out.flush(tx).await.is_err() {
            return StreamEnd::ClientCancel;
        }
    }
    cut(tx, p.format, terminal, why).await
}

/// `force_stream` (R9.6): read the primed stream to its end before `deadline` and fold it into
/// one JSON answer. Nothing has reached the client, so a stream that breaks or ends before its
/// terminal event is an ordinary failed attempt.
pub async fn assemble(
    mut p: Primed,
    dialect: convert::Dialect,
    deadline: Instant,
) -> Result<(Bytes, Usage), Outcome> {
    let mut asm = convert::assemble::Assembler::new(dialect);
    let mut usage = StreamUsage::default();
    let mut terminal = false;
    let format = p.format;
    let mut take = |ev: &Event, terminal: &mut bool| {
        *terminal |= dialect::is_terminal(format, ev);
        usage.observe(ev);
        asm.event(ev);
    };
    for ev in std::mem::take(&mut p.held) {
        take(&ev, &mut terminal);
    }
    loop {
        while let Some(ev) = p.framer.next_event() {
            take(&ev, &mut terminal);
        }
        if p.ended {
            break;
        }
        if p.framer.overflowed() {
            return Err(Outcome::Transport(TransportKind::Broken));
        }
        match p.read(deadline).await {
            Ok(()) => {}
            Err(None) => return Err(Outcome::Transport(TransportKind::BodyTimeout)),
            Err(Some(kind)) => return Err(Outcome::Transport(kind)),
        }
    }
    if !terminal {
        return Err(Outcome::Transport(TransportKind::Broken));
    }
    let body =
        serde_json::to_vec(&asm.finish()).map_err(|_| Outcome::Transport(TransportKind::Broken))?;
    Ok((Bytes::from(body), usage.reported))
}

/// End of the upstream stream: complete when the terminal event was seen, else close with an
/// explicit `stream_incomplete` error in the endpoint's format (R9.4).
async fn cut(
    tx: &mpsc::Sender<Result<Bytes, Aborted>>,
    format: StreamFormat,
    terminal: bool,
    why: &str,
) -> StreamEnd {
    if terminal || format == StreamFormat::Other {
        return StreamEnd::Complete;
    }
    let _ = tx.send(Ok(dialect::incomplete_event(format, why))).await;
    StreamEnd::Incomplete
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records how the stream it watched ended.
    struct Recorder(Arc<Mutex<Vec<StreamEnd>>>);

    impl StreamObserver for Recorder {
        fn event(&mut self, _: &Event) {}
        fn end(self: Box<Self>, end: StreamEnd) {
            if let Ok(mut ends) = self.0.lock() {
                ends.push(end);
            }
        }
    }

    /// A relay dropped at any point — before its first poll included — tells its observer
    /// once that the client left; a relay that ends tells it how, once.
    #[test]
    fn the_observer_hears_the_end_once_however_the_relay_stops() {
        let ends = Arc::new(Mutex::new(Vec::new()));
        drop(Ending(Some(Box::new(Recorder(ends.clone())))));
        Ending(Some(Box::new(Recorder(ends.clone())))).end(StreamEnd::Complete);
        assert_eq!(
            *ends.lock().unwrap(),
            [StreamEnd::ClientCancel, StreamEnd::Complete]
        );
    }

    /// Every way a committed stream ends is counted through a handle registered at start
    /// (`telemetry::STREAM_ENDS`), and each has a label of its own.
    #[test]
    fn every_stream_end_has_a_registered_label() {
        let ends = [
            StreamEnd::Complete,
            StreamEnd::Incomplete,
            StreamEnd::ClientCancel,
        ];
        let labels: Vec<_> = ends.iter().map(|e| e.label()).collect();
        assert_eq!(labels, telemetry::STREAM_ENDS);
    }

    fn poll_alarm(alarm: &mut Alarm, wake: Instant) -> Poll<()> {
        alarm.poll_until(wake, &mut Context::from_waker(std::task::Waker::noop()))
    }

    /// The relay's alarm (R9.5 idle gates, keepalives) is ready at the wake it is polled
    /// for, whether that wake moved later (events came) or earlier, and never before it.
    #[tokio::test(start_paused = true)]
    async fn the_alarm_rings_at_the_wake_it_is_asked_for() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let mut alarm = Alarm::default();
        assert_eq!(poll_alarm(&mut alarm, start + ms(100)), Poll::Pending);
        // Events came: the wake moved on; the sleep set for 100 ms fires early, unseen.
        tokio::time::advance(ms(150)).await;
        assert_eq!(poll_alarm(&mut alarm, start + ms(400)), Poll::Pending);
        tokio::time::advance(ms(200)).await;
        assert_eq!(poll_alarm(&mut alarm, start + ms(400)), Poll::Pending);
        tokio::time::advance(ms(60)).await;
        assert_eq!(poll_alarm(&mut alarm, start + ms(400)), Poll::Ready(()));
        // A wake earlier than the sleep's deadline is not missed.
        let mut alarm = Alarm::default();
        assert_eq!(poll_alarm(&mut alarm, start + ms(10_000)), Poll::Pending);
        assert_eq!(poll_alarm(&mut alarm, start + ms(500)), Poll::Pending);
        tokio::time::advance(ms(100)).await;
        assert_eq!(poll_alarm(&mut alarm, start + ms(500)), Poll::Ready(()));
    }
}
