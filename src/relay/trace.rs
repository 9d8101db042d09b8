//! One request's trace (R20.1): the span id of each attempt (sent upstream as its
//! `traceparent`), the attempt spans as the attempts are recorded (a resumed continuation is
//! one more), and the request span built when the request's record is written — GenAI
//! semantic conventions plus switchyard's own attributes. Never prompt or answer content,
//! never a key (its fingerprint only).

use std::time::{Duration, SystemTime};

use http::HeaderValue;
use opentelemetry::trace::SpanId;
use opentelemetry::{Array, KeyValue, StringValue, Value};

use crate::config::model::{Channel, ChannelKind};
use crate::relay::context::Context;
use crate::routing::family::PathFamily;
use crate::routing::outcome::OutcomeFacts;
use crate::state::keys::KeyFp;
use crate::store::RequestRecord;
use crate::telemetry::otlp::{new_span_id, RequestSpans, SpanRecord, TraceCtx, Traces};
use crate::wire::usage::Usage;

/// Finish reasons kept per request at most (one per choice).
const MAX_FINISH_REASONS: usize = 8;

/// The trace of one request in the making (held by `relay::finish::Finish`).
pub struct Trace {
    ctx: TraceCtx,
    started: SystemTime,
    /// The span id the next attempt carries upstream (set by `traceparent`).
    pending: Option<SpanId>,
    attempts: Vec<SpanRecord>,
    operation: &'static str,
    /// Request attributes known at the start (model, max tokens, temperature, stream).
    request: Vec<KeyValue>,
    finish_reasons: Vec<String>,
    usage: Option<Usage>,
    ttfb: Option<Duration>,
    provider: Option<&'static str>,
}

/// `gen_ai.operation.name` of a request family.
fn operation(f: PathFamily) -> &'static str {
    match f {
        PathFamily::Chat | PathFamily::Messages | PathFamily::Responses => "chat",
        PathFamily::Completions => "text_completion",
        PathFamily::Embeddings => "embeddings",
        PathFamily::TokenCount => "count_tokens",
        PathFamily::Images => "generate_image",
        _ => "other",
    }
}

/// `gen_ai.provider.name` of a channel kind (the semantic conventions' values).
fn provider(k: ChannelKind) -> &'static str {
    match k {
        ChannelKind::OpenAi => "openai",
        ChannelKind::Anthropic => "anthropic",
        ChannelKind::Azure => "azure.ai.openai",
        ChannelKind::Gemini => "gcp.gemini",
    }
}

#[derive(serde::Deserialize)]
struct Sampling {
    #[serde(default)]
    temperature: Option<f64>,
}

impl Trace {
    /// The request's trace, when `telemetry.otlp` is on (`cx.trace`).
    pub fn of(cx: &Context) -> Option<Trace> {
        let ctx = cx.trace.clone()?;
        let operation = operation(cx.family);
        let mut request = vec![
            KeyValue::new("gen_ai.operation.name", operation),
            KeyValue::new("gen_ai.request.model", cx.model().to_string()),
            KeyValue::new("gen_ai.request.stream", cx.wants_stream()),
        ];
        if ctx.sampled {
            if let Some(n) = cx.peek.as_ref().and_then(|p| p.completion_hint) {
                request.push(KeyValue::new("gen_ai.request.max_tokens", n as i64));
            }
            // One more read of the body, for sampled requests only: the serde skip of every
            // other field, no allocation for them.
            if let Ok(Sampling {
                temperature: Some(t),
            }) = serde_json::from_slice::<Sampling>(&cx.body)
            {
                request.push(KeyValue::new("gen_ai.request.temperature", t));
            }
        }
        Some(Trace {
            ctx,
            started: SystemTime::now() - crate::clock::elapsed_std(cx.started),
            pending: None,
            attempts: Vec::new(),
            operation,
            request,
            finish_reasons: Vec::new(),
            usage: None,
            ttfb: None,
            provider: None,
        })
    }

    /// Whether this request's spans are exported.
    pub fn sampled(&self) -> bool {
        self.ctx.sampled
    }

    /// The trace id (the request log and its `request failed` line).
    pub fn trace_id(&self) -> String {
        self.ctx.trace_id_hex()
    }

    /// The `traceparent` of the next attempt: a new span id, the attempt span's.
    pub fn traceparent(&mut self) -> Option<HeaderValue> {
        let id = new_span_id();
        self.pending = Some(id);
        HeaderValue::from_str(&self.ctx.traceparent(id)).ok()
    }

    /// The span id of the next attempt, chosen elsewhere (a stream resume's).
    pub fn set_pending(&mut self, id: SpanId) {
        self.pending = Some(id);
    }

    /// One attempt recorded: its span (`elapsed` long, ending now).
    pub fn attempt(&mut self, attempt: Attempt<'_>) {
        let span_id = self.pending.take().unwrap_or_else(new_span_id);
        if !self.ctx.sampled {
            return;
        }
        let end = SystemTime::now();
        let facts = attempt.facts;
        let provider = provider(attempt.channel.kind);
        self.provider = Some(provider);
        let mut attrs = vec![
            KeyValue::new("gen_ai.operation.name", self.operation),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new("gen_ai.request.model", attempt.upstream_model.to_string()),
            KeyValue::new("switchyard.channel", attempt.channel.name.clone()),
            KeyValue::new("switchyard.attempt.index", self.attempts.len() as i64),
            KeyValue::new("switchyard.outcome", facts.class),
            KeyValue::new("switchyard.possibly_charged", facts.possibly_charged),
            KeyValue::new("switchyard.resumed", attempt.resumed),
        ];
        if let Some(k) = attempt.channel.keys.get(attempt.key_index) {
            attrs.push(KeyValue::new("switchyard.key_fp", KeyFp::of(k).short()));
        }
        if let Some(s) = facts.upstream_status {
            attrs.push(KeyValue::new("http.response.status_code", i64::from(s)));
        }
        if let Some(t) = attempt.translation {
            attrs.push(KeyValue::new("switchyard.translation", t.to_string()));
        }
        let name = format!("{} {}", self.operation, attempt.upstream_model);
        self.attempts.push(SpanRecord {
            span_id,
            name: name.into(),
            start: end - attempt.elapsed,
            end,
            attributes: attrs,
            error: (!facts.success).then(|| facts.class.to_string()),
        });
    }

    /// A finish reason seen in the answer (`finish_reason`, `stop_reason`, a Responses
    /// status), kept once each.
    pub fn finish_reason(&mut self, reason: &str) {
        if self.ctx.sampled
            && self.finish_reasons.len() < MAX_FINISH_REASONS
            && !self.finish_reasons.iter().any(|x| x == reason)
        {
            self.finish_reasons.push(reason.to_string());
        }
    }

    /// The request's usage (written with the record).
    pub fn usage(&mut self, usage: &Usage) {
        self.usage = Some(*usage);
    }

    /// Time to the first byte of a committed stream.
    pub fn ttfb(&mut self, ttfb: Duration) {
        self.ttfb = Some(ttfb);
    }

    /// The request is written: build its span and hand the spans to the exporter.
    pub fn submit(self, traces: &Traces, rec: &RequestRecord) {
        if !self.ctx.sampled {
            return;
        }
        let mut attrs = self.request;
        attrs.extend(record_attributes(rec));
        if let Some(p) = self.provider {
            attrs.push(KeyValue::new("gen_ai.provider.name", p));
        }
        if let Some(u) = self.usage.filter(|u| !u.is_zero()) {
            attrs.extend(usage_attributes(&u));
        }
        if let Some(t) = self.ttfb {
            attrs.push(KeyValue::new("switchyard.ttfb_ms", t.as_millis() as i64));
        }
        if !self.finish_reasons.is_empty() {
            let reasons: Vec<StringValue> =
                self.finish_reasons.into_iter().map(Into::into).collect();
            attrs.push(KeyValue::new(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(reasons)),
            ));
        }
        let ok = (200..300).contains(&rec.final_status);
        let error = (!ok).then(|| {
            rec.error_code
                .clone()
                .unwrap_or_else(|| format!("status {}", rec.final_status))
        });
        let model = &*rec.public_model;
        let request = SpanRecord {
            span_id: self.ctx.span_id,
            name: format!("{} {model}", self.operation).into(),
            start: self.started,
            end: SystemTime::now(),
            attributes: attrs,
            error,
        };
        traces.submit(RequestSpans {
            trace: self.ctx,
            request,
            attempts: self.attempts,
        });
    }
}

/// What `Trace::attempt` reads of one attempt.
pub struct Attempt<'a> {
    pub channel: &'a Channel,
    pub key_index: usize,
    pub upstream_model: &'a str,
    pub facts: &'a OutcomeFacts,
    pub elapsed: Duration,
    pub translation: Option<&'a str>,
    /// A stream resume's continuation (R18.2).
    pub resumed: bool,
}

/// The request span's attributes from the request's record.
fn record_attributes(rec: &RequestRecord) -> Vec<KeyValue> {
    let mut attrs = vec![
        KeyValue::new("switchyard.request_id", rec.id.clone()),
        KeyValue::new("switchyard.client", rec.client.clone()),
        KeyValue::new("switchyard.chain", rec.chain.clone()),
        KeyValue::new("switchyard.attempts", rec.attempts.len() as i64),
        KeyValue::new("http.response.status_code", i64::from(rec.final_status)),
        KeyValue::new("url.path", rec.path.clone()),
    ];
    if !rec.upstream_model.is_empty() {
        attrs.push(KeyValue::new(
            "gen_ai.response.model",
            rec.upstream_model.clone(),
        ));
    }
    if let Some(c) = &rec.error_code {
        attrs.push(KeyValue::new("error.type", c.clone()));
    }
    if let Some(o) = &rec.stream_outcome {
        attrs.push(KeyValue::new("switchyard.stream_outcome", o.clone()));
    }
    if rec.attempts.iter().any(|x| x.possibly_charged) {
        attrs.push(KeyValue::new("switchyard.possibly_charged", true));
    }
    if let Some(last) = rec.attempts.last() {
        attrs.push(KeyValue::new("switchyard.channel", last.channel.clone()));
        attrs.push(KeyValue::new(
            "switchyard.outcome",
            last.error_class.to_string(),
        ));
        if let Some(t) = &last.translation {
            attrs.push(KeyValue::new("switchyard.translation", t.clone()));
        }
    }
    attrs
}

/// `gen_ai.usage.*`: input tokens with cache reads and writes included.
fn usage_attributes(usage: &Usage) -> [KeyValue; 4] {
    [
        KeyValue::new("gen_ai.usage.input_tokens", usage.prompt_tokens as i64),
        KeyValue::new("gen_ai.usage.output_tokens", usage.completion_tokens as i64),
        KeyValue::new(
            "gen_ai.usage.cache_read.input_tokens",
            usage.cached_tokens as i64,
        ),
        KeyValue::new(
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write_tokens as i64,
        ),
    ]
}

/// The finish reason an answer's JSON (a whole body, or one stream event) carries: Chat
/// Completions `choices[].finish_reason`, Anthropic `stop_reason` (top level or in a
/// `message_delta`'s `delta`), Gemini `candidates[].finishReason`, a Responses `status`.
pub fn finish_reasons(v: &serde_json::Value, mut f: impl FnMut(&str)) {
    let mut each = |arr: Option<&serde_json::Value>, field: &str| {
        for c in arr.and_then(|a| a.as_array()).into_iter().flatten() {
            if let Some(r) = c.get(field).and_then(|r| r.as_str()) {
                f(r);
            }
        }
    };
    each(v.get("choices"), "finish_reason");
    each(v.get("candidates"), "finishReason");
    let stop = v
        .get("stop_reason")
        .or_else(|| v.get("delta").and_then(|d| d.get("stop_reason")));
    if let Some(r) = stop.and_then(|r| r.as_str()) {
        f(r);
    }
    let resp = v.get("response").unwrap_or(v);
    if resp.get("object").and_then(|o| o.as_str()) == Some("response") {
        if let Some(s) = resp.get("status").and_then(|s| s.as_str()) {
            if s != "in_progress" {
                f(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::finish_reasons;

    fn reasons(s: &str) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(s).expect("json");
        let mut out = Vec::new();
        finish_reasons(&v, |r| out.push(r.to_string()));
        out
    }

    #[test]
    fn finish_reasons_of_each_format() {
        assert_eq!(
            reasons(r#"{"choices":[{"finish_reason":"stop"},{"finish_reason":null}]}"#),
            ["stop"]
        );
        assert_eq!(
            reasons(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#),
            ["end_turn"]
        );
        assert_eq!(reasons(r#"{"stop_reason":"max_tokens"}"#), ["max_tokens"]);
        assert_eq!(
            reasons(r#"{"candidates":[{"finishReason":"STOP"}]}"#),
            ["STOP"]
        );
        assert_eq!(
            reasons(
                r#"{"type":"response.completed","response":{"object":"response","status":"completed"}}"#
            ),
            ["completed"]
        );
        assert!(reasons(r#"{"choices":[{"delta":{"content":"hi"}}]}"#).is_empty());
    }
}
