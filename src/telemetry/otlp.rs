//! OpenTelemetry traces over OTLP/HTTP (R20.1): the W3C trace context of a request
//! (continued from the client's `traceparent`, or a new trace), and the exporter — a bounded
//! hand-off that drops and counts when full, and one task that batches the finished
//! requests' spans and sends them with `opentelemetry-otlp` (protobuf over HTTP).
//!
//! Spans are built once, when a request ends, from its record: the request path pays one
//! `try_send`. Nothing here blocks a request.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use tokio::sync::mpsc;

use crate::config::model::Otlp;

/// Finished requests that may wait for the exporter; beyond, they are dropped and counted.
pub const QUEUE: usize = 2048;
/// Requests per export call at most.
const BATCH: usize = 256;
/// A batch is sent at least this often while requests arrive.
const FLUSH: Duration = Duration::from_millis(500);
/// Bound on one export call.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// One request's trace context (W3C Trace Context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceCtx {
    pub trace_id: TraceId,
    /// The gateway's request span: the parent of its attempt spans and of the upstream's.
    pub span_id: SpanId,
    /// The client's span, when it sent a valid `traceparent`.
    pub parent: Option<SpanId>,
    pub sampled: bool,
    /// The client's `tracestate`, passed on unchanged.
    pub tracestate: Option<String>,
}

/// `00-<trace id>-<parent id>-<flags>` (any version but `ff`; a later version may append
/// fields after a `-`). All-zero ids are invalid.
pub fn parse_traceparent(header: &str) -> Option<(TraceId, SpanId, bool)> {
    let bytes = header.trim().as_bytes();
    if bytes.len() < 55 || (bytes.len() > 55 && (bytes[..2] == *b"00" || bytes[55] != b'-')) {
        return None;
    }
    let hex = |s: &[u8]| {
        s.iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    };
    let dash = |i: usize| bytes[i] == b'-';
    if !(dash(2) && dash(35) && dash(52) && hex(&bytes[..2])) || bytes[..2] == *b"ff" {
        return None;
    }
    if !(hex(&bytes[3..35]) && hex(&bytes[36..52]) && hex(&bytes[53..55])) {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let trace = TraceId::from_hex(&text[3..35]).ok()?;
    let span = SpanId::from_hex(&text[36..52]).ok()?;
    let flags = u8::from_str_radix(&text[53..55], 16).ok()?;
    if trace == TraceId::INVALID || span == SpanId::INVALID {
        return None;
    }
    Some((trace, span, flags & 1 == 1))
}

/// A random, valid span id.
pub fn new_span_id() -> SpanId {
    SpanId::from(fastrand::u64(1..))
}

/// A new trace: the ratio decides on the trace id (the same decision any W3C
/// `TraceIdRatioBased` sampler makes for this id).
fn sampled_by_ratio(trace: TraceId, ratio: f64) -> bool {
    let low = u64::from_be_bytes(trace.to_bytes()[8..].try_into().unwrap_or([0; 8]));
    ratio >= 1.0 || ((low >> 1) as f64) < ratio * (1u64 << 63) as f64
}

impl TraceCtx {
    /// The client's trace continued (its sampled flag decides), or a new one (the ratio).
    pub fn of(headers: &HeaderMap, sample_ratio: f64) -> TraceCtx {
        let parent = headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_traceparent);
        let tracestate = parent.and(
            headers
                .get("tracestate")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        );
        match parent {
            Some((trace_id, span, sampled)) => TraceCtx {
                trace_id,
                span_id: new_span_id(),
                parent: Some(span),
                sampled,
                tracestate,
            },
            None => {
                let trace_id = TraceId::from(fastrand::u128(1..));
                TraceCtx {
                    trace_id,
                    span_id: new_span_id(),
                    parent: None,
                    sampled: sampled_by_ratio(trace_id, sample_ratio),
                    tracestate: None,
                }
            }
        }
    }

    /// The `traceparent` naming `span` (the request span, or one attempt's) as the parent.
    pub fn traceparent(&self, span: SpanId) -> String {
        format!(
            "00-{}-{}-{:02x}",
            self.trace_id,
            span,
            u8::from(self.sampled)
        )
    }

    /// The trace id as 32 hex digits (log lines).
    pub fn trace_id_hex(&self) -> String {
        self.trace_id.to_string()
    }
}

/// One span of a finished request, in wall-clock time.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    pub span_id: SpanId,
    pub name: Cow<'static, str>,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<KeyValue>,
    /// `Some(description)`: the span's status is an error.
    pub error: Option<String>,
}

/// A finished request: its span and one child span per attempt.
#[derive(Debug, Clone)]
pub struct RequestSpans {
    pub trace: TraceCtx,
    pub request: SpanRecord,
    pub attempts: Vec<SpanRecord>,
}

/// The exporter's hand-off (see the module doc).
#[derive(Debug)]
pub struct Traces {
    tx: mpsc::Sender<RequestSpans>,
    pub sample_ratio: f64,
}

impl Traces {
    /// Build the OTLP exporter of `cfg` and start its task (on the current runtime).
    pub fn start(cfg: &Otlp) -> Result<Traces, String> {
        let resource = opentelemetry_sdk::Resource::builder_empty()
            .with_service_name(cfg.service_name.clone())
            .with_attributes([KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))])
            .build();
        let exporter = super::otlp_export::Exporter::of(cfg, &resource, EXPORT_TIMEOUT)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(rx, exporter));
        Ok(Traces {
            tx,
            sample_ratio: cfg.sample_ratio,
        })
    }

    /// Hand a finished request over; never waits. A full queue drops it and counts.
    pub fn submit(&self, spans: RequestSpans) {
        if self.tx.try_send(spans).is_err() {
            metrics::counter!(super::OTLP_DROPPED).increment(1);
        }
    }
}

async fn run(mut rx: mpsc::Receiver<RequestSpans>, exporter: super::otlp_export::Exporter) {
    let scope = InstrumentationScope::builder("switchyard")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let mut warned = false;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let until = tokio::time::Instant::now() + FLUSH;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(s)) => batch.push(s),
                Ok(None) | Err(_) => break,
            }
        }
        let spans: Vec<SpanData> = batch.iter().flat_map(|r| span_data(r, &scope)).collect();
        let n = spans.len() as u64;
        match exporter.export(spans).await {
            Ok(()) => {
                metrics::counter!(super::OTLP_SPANS, "result" => "exported").increment(n);
                warned = false;
            }
            Err(e) => {
                metrics::counter!(super::OTLP_SPANS, "result" => "failed").increment(n);
                if !warned {
                    tracing::warn!(error = %e, spans = n, "OTLP trace export failed");
                    warned = true;
                }
            }
        }
    }
}

/// The request span (a server span, child of the client's when it sent one) and its attempt
/// spans (client spans, children of the request span).
fn span_data(r: &RequestSpans, scope: &InstrumentationScope) -> Vec<SpanData> {
    let state = r
        .trace
        .tracestate
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or(TraceState::NONE);
    let data = |s: &SpanRecord, parent: SpanId, remote: bool, kind: SpanKind| SpanData {
        span_context: SpanContext::new(
            r.trace.trace_id,
            s.span_id,
            TraceFlags::SAMPLED,
            false,
            state.clone(),
        ),
        parent_span_id: parent,
        parent_span_is_remote: remote,
        span_kind: kind,
        name: s.name.clone(),
        start_time: s.start,
        end_time: s.end,
        attributes: s.attributes.clone(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: match &s.error {
            Some(d) => Status::error(d.clone()),
            None => Status::Unset,
        },
        instrumentation_scope: scope.clone(),
    };
    let parent = r.trace.parent.unwrap_or(SpanId::INVALID);
    let mut out = vec![data(
        &r.request,
        parent,
        r.trace.parent.is_some(),
        SpanKind::Server,
    )];
    out.extend(
        r.attempts
            .iter()
            .map(|a| data(a, r.request.span_id, false, SpanKind::Client)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_parsing_follows_w3c() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let (t, s, sampled) = parse_traceparent(ok).expect("valid");
        assert_eq!(t.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s.to_string(), "00f067aa0ba902b7");
        assert!(sampled);
        assert!(
            !parse_traceparent(&ok.replace("-01", "-00"))
                .expect("valid")
                .2
        );
        for bad in [
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert!(
            parse_traceparent(future).is_some(),
            "a later version may append"
        );
    }

    #[test]
    fn a_request_continues_the_clients_trace_or_starts_one() {
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .expect("header"),
        );
        h.insert("tracestate", "vendor=abc".parse().expect("header"));
        let t = TraceCtx::of(&h, 0.0);
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            t.parent.map(|p| p.to_string()).as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert!(t.sampled, "the parent's flag wins over the ratio");
        assert_eq!(t.tracestate.as_deref(), Some("vendor=abc"));
        let up = t.traceparent(t.span_id);
        assert_eq!(parse_traceparent(&up).map(|p| p.1), Some(t.span_id));
        let fresh = TraceCtx::of(&HeaderMap::new(), 1.0);
        assert!(fresh.sampled && fresh.parent.is_none());
        assert!(!TraceCtx::of(&HeaderMap::new(), 0.0).sampled);
        let n = (0..2000)
            .filter(|_| TraceCtx::of(&HeaderMap::new(), 0.25).sampled)
            .count();
        assert!((350..650).contains(&n), "about a quarter sampled: {n}");
    }
}
