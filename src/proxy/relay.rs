//! One attempt's response: read errors and full bodies within their time gates, prime a stream
//! up to its first event, then commit and relay it event by event (R9.1–R9.5, R9.8).
//!
//! Architecture Invariant (commit point, R9.3): a `Primed` stream is the only way to produce a
//! streaming response, and `commit` consumes it: after `commit` the attempt loop has returned,
//! so nothing can be retried once a byte has reached the client.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Instant};

use super::body::ResponseBody;
use super::convert;
use super::sse::{self, Event, Framer, StreamFormat};
use super::usage::Usage;
use crate::routing::policy::{Outcome, TransportKind};
use crate::telemetry;

/// Largest upstream body read into memory (non-stream answers and error bodies).
const MAX_UPSTREAM_BODY: usize = 128 * 1024 * 1024;
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Read an upstream body completely, before `deadline` and within `max` bytes.
pub async fn read_body(
    body: &mut Incoming,
    deadline: Instant,
    max: usize,
) -> Result<Bytes, TransportKind> {
    let mut buf = bytes::BytesMut::new();
    loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(TransportKind::BodyTimeout),
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(_))) => return Err(TransportKind::Broken),
            Ok(Some(Ok(frame))) => {
                if let Ok(d) = frame.into_data() {
                    if buf.len() + d.len() > max {
                        return Err(TransportKind::Broken);
                    }
                    buf.extend_from_slice(&d);
                }
            }
        }
    }
}

/// Read a non-stream success body (R9.7).
pub async fn read_full(body: &mut Incoming, deadline: Instant) -> Result<Bytes, TransportKind> {
    read_body(body, deadline, MAX_UPSTREAM_BODY).await
}

/// Turn an upstream error status and body into the classifier's outcome.
pub fn status_outcome(code: u16, body: &[u8]) -> Outcome {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    let err = if v["error"].is_object() {
        &v["error"]
    } else {
        &v
    };
    let s = |x: &serde_json::Value| x.as_str().map(str::to_string);
    let message = s(&err["message"])
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned());
    Outcome::Status {
        code,
        error_code: s(&err["code"]),
        error_type: s(&err["type"]),
        message,
    }
}

/// Read an error body (bounded) for classification and for relaying to the client.
pub async fn read_error(body: &mut Incoming, deadline: Instant) -> Bytes {
    let d = deadline.min(Instant::now() + Duration::from_secs(10));
    read_body(body, d, MAX_ERROR_BODY).await.unwrap_or_default()
}

/// A stream whose first event arrived and is not an error: ready to commit. Only `prime`
/// makes one (its fields are private), and only `commit` (relay to the client) or `assemble`
/// (fold into one JSON answer before anything reached the client) consume it.
pub struct Primed {
    body: Incoming,
    framer: Framer,
    held: Vec<Event>,
    format: StreamFormat,
    hide_usage_chunk: bool,
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

    /// Relay (or hide) one event: the observer sees it either way.
    async fn forward(
        &self,
        ev: Event,
        tx: &mpsc::Sender<Bytes>,
        obs: &mut dyn StreamObserver,
    ) -> Result<bool, ()> {
        obs.event(&ev);
        if self.hide_usage_chunk && convert::is_usage_chunk(&ev) {
            return Ok(false);
        }
        tx.send(ev.raw).await.map(|_| true).map_err(|_| ())
    }
}

/// Read until the first data event, each read within `first_byte` (upstream keepalive comments
/// reset the timer, R9.2). Failure here is an ordinary failed attempt.
pub async fn prime(
    mut body: Incoming,
    format: StreamFormat,
    first_byte: Duration,
    deadline: Instant,
) -> Result<Primed, Outcome> {
    let mut framer = Framer::new(format != StreamFormat::Messages && format != StreamFormat::Other);
    loop {
        let gate = (Instant::now() + first_byte).min(deadline);
        let frame = match timeout_at(gate, body.frame()).await {
            Err(_) if gate == deadline => return Err(Outcome::DeadlineExceeded),
            Err(_) => {
                metrics::counter!(telemetry::STREAMS, "outcome" => "first_byte_timeout")
                    .increment(1);
                return Err(Outcome::Transport(TransportKind::FirstByteTimeout));
            }
            Ok(None) => return Err(Outcome::Transport(TransportKind::EmptyBody)),
            Ok(Some(Err(_))) => return Err(Outcome::Transport(TransportKind::Broken)),
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        framer.push(&data);
        while let Some(ev) = framer.next_event() {
            if ev.comment_only {
                continue;
            }
            if let Some(code) = sse::hidden_error(&ev) {
                let code = code.unwrap_or(502);
                let Outcome::Status {
                    error_code,
                    error_type,
                    message,
                    ..
                } = status_outcome(code, ev.data.as_deref().unwrap_or("").as_bytes())
                else {
                    unreachable!("status_outcome returns Status")
                };
                return Err(Outcome::Status {
                    code,
                    error_code,
                    error_type,
                    message,
                });
            }
            return Ok(Primed {
                body,
                framer,
                held: vec![ev],
                format,
                hide_usage_chunk: false,
            });
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
    fn end(self: Box<Self>, end: StreamEnd);
}

/// Timing of a committed stream.
pub struct RelayTimes {
    pub keepalive: Duration,
    /// A committed stream silent (not even a comment) for this long is cut.
    pub idle: Duration,
}

/// Commit: start relaying `p` to the client and return the client body (R9.1, R9.3).
pub fn commit(p: Primed, times: RelayTimes, observer: Box<dyn StreamObserver>) -> ResponseBody {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(relay(p, times, tx, observer));
    ResponseBody::Channel(rx)
}

async fn relay(
    mut p: Primed,
    times: RelayTimes,
    tx: mpsc::Sender<Bytes>,
    mut obs: Box<dyn StreamObserver>,
) {
    let end = pump(&mut p, &times, &tx, obs.as_mut()).await;
    // Dropping the upstream body here closes the upstream connection at once (R9.8).
    drop(p);
    obs.end(end);
}

async fn pump(
    p: &mut Primed,
    times: &RelayTimes,
    tx: &mpsc::Sender<Bytes>,
    obs: &mut dyn StreamObserver,
) -> StreamEnd {
    let mut terminal = false;
    for ev in std::mem::take(&mut p.held) {
        terminal |= sse::is_terminal(p.format, &ev);
        if p.forward(ev, tx, obs).await.is_err() {
            return StreamEnd::ClientCancel;
        }
    }
    let mut last_upstream = Instant::now();
    let mut last_client = Instant::now();
    loop {
        let wake = (last_client + times.keepalive).min(last_upstream + times.idle);
        tokio::select! {
            biased;
            _ = tx.closed() => return StreamEnd::ClientCancel,
            frame = timeout_at(wake, p.body.frame()) => match frame {
                Err(_) => {
                    if Instant::now() >= last_upstream + times.idle {
                        return cut(tx, p.format, terminal, "upstream went silent").await;
                    }
                    if tx.send(sse::keepalive(p.format)).await.is_err() {
                        return StreamEnd::ClientCancel;
                    }
                    obs.keepalive();
                    last_client = Instant::now();
                }
                Ok(None) => {
                    // Flush a final event that lacked its blank line.
                    if p.framer.pending() > 0 {
                        p.framer.push(b"\n\n");
                        if let Some(ev) = p.framer.next_event() {
                            terminal |= sse::is_terminal(p.format, &ev);
                            if p.forward(ev, tx, obs).await.is_err() {
                                return StreamEnd::ClientCancel;
                            }
                        }
                    }
                    return cut(tx, p.format, terminal, "upstream closed the stream").await;
                }
                Ok(Some(Err(_))) => {
                    return cut(tx, p.format, terminal, "upstream connection broke").await
                }
                Ok(Some(Ok(frame))) => {
                    last_upstream = Instant::now();
                    let Ok(data) = frame.into_data() else { continue };
                    p.framer.push(&data);
                    while let Some(ev) = p.framer.next_event() {
                        terminal |= sse::is_terminal(p.format, &ev);
                        match p.forward(ev, tx, obs).await {
                            Err(()) => return StreamEnd::ClientCancel,
                            Ok(true) => last_client = Instant::now(),
                            Ok(false) => {}
                        }
                    }
                }
            }
        }
    }
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
    let mut usage = Usage::default();
    let mut terminal = false;
    let format = p.format;
    let mut take = |ev: &Event, terminal: &mut bool| {
        *terminal |= sse::is_terminal(format, ev);
        usage.observe(ev);
        asm.event(ev);
    };
    for ev in std::mem::take(&mut p.held) {
        take(&ev, &mut terminal);
    }
    loop {
        match timeout_at(deadline, p.body.frame()).await {
            Err(_) => return Err(Outcome::Transport(TransportKind::BodyTimeout)),
            Ok(Some(Err(_))) => return Err(Outcome::Transport(TransportKind::Broken)),
            Ok(None) => break,
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                p.framer.push(&data);
                while let Some(ev) = p.framer.next_event() {
                    take(&ev, &mut terminal);
                }
            }
        }
    }
    if p.framer.pending() > 0 {
        p.framer.push(b"\n\n");
        while let Some(ev) = p.framer.next_event() {
            take(&ev, &mut terminal);
        }
    }
    if !terminal {
        return Err(Outcome::Transport(TransportKind::Broken));
    }
    let body =
        serde_json::to_vec(&asm.finish()).map_err(|_| Outcome::Transport(TransportKind::Broken))?;
    Ok((Bytes::from(body), usage))
}

/// End of the upstream stream: complete when the terminal event was seen, else close with an
/// explicit `stream_incomplete` error in the endpoint's format (R9.4).
async fn cut(
    tx: &mpsc::Sender<Bytes>,
    format: StreamFormat,
    terminal: bool,
    why: &str,
) -> StreamEnd {
    if terminal || format == StreamFormat::Other {
        return StreamEnd::Complete;
    }
    let _ = tx.send(sse::incomplete_event(format, why)).await;
    StreamEnd::Incomplete
}
