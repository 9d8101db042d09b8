//! Stream resume (R18.2, `resilience.stream_resume`): a text stream cut or stalled after
//! its commit point is continued on the next target. The same request goes there with the
//! text already delivered as an assistant prefill, and the continuation is spliced into the
//! client's open stream, so the client receives one whole answer in its own format with one
//! terminal event. Only text resumes: a cut inside a tool call, a thinking block or any other
//! part ends with `stream_incomplete` as before, and so does a cut with no target that takes
//! a prefill (`channels.*.prefill`; by default Anthropic channels do, OpenAI-format and
//! Gemini ones do not).
//!
//! Three pieces: `Delivery` follows what reached the client; `Resumer` finds and primes the
//! continuation; `Splice` rewrites the continuation's events to fit the open stream (its
//! opening dropped, Anthropic block indexes moved onto the client's; for a Responses client
//! the typed events renumbered, `responses`).

pub mod responses;

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::model::{Channel, ChannelKind};
use crate::relay::answer::stream::Primed;
use crate::relay::attempt::exchange::{exchange, prepare, Answer, Exchange, Gates};
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::routing::family::PathFamily;
use crate::routing::plan::Step;
use crate::wire::dialect::{self, StreamFormat};
use crate::wire::sse::Event;

/// What reached the client of a committed stream: its text, and whether it is only text.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    pub text: String,
    /// Nothing but text so far (a tool call, thinking or any other part rules a resume out).
    pub text_only: bool,
    /// The Anthropic text block left open by the cut, if any.
    pub open: Option<u64>,
    /// The next Anthropic block index the client has not seen.
    pub next_index: u64,
    /// A Responses client's stream as it has seen it.
    pub responses: responses::Seen,
}

impl Delivery {
    pub fn new() -> Self {
        Delivery {
            text_only: true,
            ..Delivery::default()
        }
    }

    /// Follow one event relayed to the client.
    pub fn observe(&mut self, format: StreamFormat, ev: &Event) {
        let Some(v) = ev.json() else { return };
        match format {
            StreamFormat::Chat => self.chat(v),
            StreamFormat::Messages => self.messages(v),
            StreamFormat::Responses => {
                if !self.responses.observe(v, &mut self.text) {
                    self.text_only = false;
                }
            }
            StreamFormat::Other => self.text_only = false,
        }
    }

    fn chat(&mut self, v: &Value) {
        for c in v["choices"].as_array().into_iter().flatten() {
            let delta = &c["delta"];
            if let Some(t) = delta["content"].as_str() {
                self.text.push_str(t);
            }
            let busy = |k: &str| match &delta[k] {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => true,
            };
            if busy("tool_calls") || busy("reasoning_content") || busy("reasoning") {
                self.text_only = false;
            }
        }
    }

    fn messages(&mut self, v: &Value) {
        let index = v["index"].as_u64();
        match v["type"].as_str() {
            Some("content_block_start") => {
                if v["content_block"]["type"] != "text" {
                    self.text_only = false;
                }
                self.open = index;
            }
            Some("content_block_delta") => match v["delta"]["type"].as_str() {
                Some("text_delta") => self
                    .text
                    .push_str(v["delta"]["text"].as_str().unwrap_or("")),
                _ => self.text_only = false,
            },
            Some("content_block_stop") => {
                self.open = None;
                self.next_index = index.map_or(self.next_index, |i| i + 1);
            }
            _ => {}
        }
    }

    /// A resume can continue this stream.
    pub fn resumable(&self) -> bool {
        self.text_only && !self.text.is_empty()
    }
}

/// A continuation, primed to its commit point.
pub struct Continued {
    pub primed: Primed,
    /// The request's snapshot (the continuation's channel is looked up in it).
    pub snap: Arc<crate::state::Snapshot>,
    pub channel: usize,
    pub key_index: usize,
    pub upstream_model: Arc<str>,
    /// The continuation's span id when traces are on (R20.1).
    pub span: Option<opentelemetry::trace::SpanId>,
    pub sent: Instant,
    /// The prefill lost the delivered text's trailing white space (Anthropic refuses it).
    pub trimmed: bool,
}

/// Finds the continuation of a cut stream among the request's remaining targets.
pub struct Resumer {
    gw: Arc<Gateway>,
    cx: Context,
    targets: VecDeque<(usize, usize, Arc<str>)>,
    left: u32,
    deadline: Instant,
}

impl Resumer {
    /// `targets`: (channel, key index, upstream model) in plan order; `max`: resumes allowed.
    pub fn new(
        gw: Arc<Gateway>,
        cx: Context,
        targets: Vec<(usize, usize, Arc<str>)>,
        max: u32,
        deadline: Instant,
    ) -> Option<Resumer> {
        let resumable = matches!(
            cx.family,
            PathFamily::Chat | PathFamily::Messages | PathFamily::Responses
        );
        (resumable && max > 0 && !targets.is_empty()).then(|| Resumer {
            gw,
            cx,
            targets: targets.into(),
            left: max,
            deadline,
        })
    }

    /// The next target that takes a prefill and answers, primed; `None` when there is none
    /// (or the resumes are used up). A target that fails is not retried.
    pub async fn next(&mut self, delivered: &str) -> Option<Continued> {
        if self.left == 0 {
            return None;
        }
        while let Some((channel, key_index, upstream_model)) = self.targets.pop_front() {
            let snap = self.cx.snap.clone();
            let ch = &snap.table.channels[channel];
            let now = Instant::now();
            let up =
                crate::state::outcome::available(ch, &snap.states[channel], &upstream_model, now);
            if !up || !accepts_prefill(ch, &upstream_model) || now >= self.deadline {
                continue;
            }
            let trim = ch.kind == ChannelKind::Anthropic;
            let body = with_prefill(self.cx.family, &self.cx.body, delivered, trim)?;
            let mut cx = self.cx.clone();
            cx.peek = crate::wire::request::peek(&body).ok();
            cx.body = body;
            let step = Step {
                group: 0,
                channel,
                key_index,
                upstream_model: upstream_model.clone(),
                same_target_retry: 0,
            };
            let mut gates = Gates::of(&snap.table.config, cx.family, self.deadline, None);
            // R20.1: the continuation is an attempt span of its own.
            let span = cx
                .trace
                .as_ref()
                .map(|_| crate::telemetry::otlp::new_span_id());
            gates.traceparent = cx
                .trace
                .as_ref()
                .zip(span)
                .and_then(|(t, s)| http::HeaderValue::from_str(&t.traceparent(s)).ok());
            let Ok(p) = prepare(&cx, &step, ch, &gates) else {
                continue;
            };
            if let Exchange::Answer(Answer::Stream { primed, .. }) =
                exchange(&self.gw, &cx, &step, ch, &gates, p).await
            {
                self.left -= 1;
                return Some(Continued {
                    primed: *primed,
                    snap: snap.clone(),
                    channel,
                    key_index,
                    upstream_model,
                    sent: now,
                    trimmed: trim && delivered.trim_end().len() < delivered.len(),
                    span,
                });
            }
        }
        None
    }
}

/// `channels.*.prefill`, `auto` by kind: Anthropic takes a trailing assistant turn and
/// continues it; OpenAI Chat Completions has no continuation mode and Gemini's is not
/// documented as one, so they do not.
pub fn accepts_prefill(ch: &Channel, _upstream_model: &str) -> bool {
    ch.prefill.unwrap_or(ch.kind == ChannelKind::Anthropic)
}

/// The client's request with `delivered` as the last assistant turn (appended to one the
/// client already ended with). Anthropic refuses a prefill that ends in white space, so
/// towards it (`trim`) the prefill is trimmed at the end (the continuation supplies it).
pub fn with_prefill(family: PathFamily, body: &[u8], delivered: &str, trim: bool) -> Option<Bytes> {
    let mut request: Value = serde_json::from_slice(body).ok()?;
    let text = if trim {
        delivered.trim_end()
    } else {
        delivered
    };
    match family {
        PathFamily::Messages | PathFamily::Chat => {}
        PathFamily::Responses => {
            responses::with_prefill(&mut request, text)?;
            return serde_json::to_vec(&request).ok().map(Bytes::from);
        }
        _ => return None,
    }
    let messages = request.get_mut("messages")?.as_array_mut()?;
    match messages.last_mut() {
        Some(last) if last["role"] == "assistant" && last["content"].is_string() => {
            let before = last["content"].as_str().unwrap_or("").to_string();
            last["content"] = Value::String(before + text);
        }
        _ => messages.push(serde_json::json!({"role": "assistant", "content": text})),
    }
    serde_json::to_vec(&request).ok().map(Bytes::from)
}

/// Rewrites a continuation's events to continue the client's open stream.
pub struct Splice {
    format: StreamFormat,
    /// The continuation's content has begun (its opening is over).
    started: bool,
    /// Anthropic: the client's open text block, and the index its first block maps to.
    open: Option<u64>,
    base: u64,
    offset: Option<i64>,
    /// A Responses client's splice.
    responses: Option<responses::Splice>,
    /// The prefill was trimmed of white space the client already has: the continuation's
    /// first text loses its leading white space.
    trim_lead: bool,
}

impl Splice {
    /// `trimmed`: the continuation's prefill lost the delivered text's trailing white space.
    pub fn new(format: StreamFormat, d: &Delivery, trimmed: bool) -> Splice {
        Splice {
            format,
            started: false,
            open: d.open,
            base: d.open.unwrap_or(d.next_index),
            offset: None,
            responses: (format == StreamFormat::Responses)
                .then(|| responses::Splice::new(&d.responses)),
            trim_lead: trimmed,
        }
    }

    /// The event as the client's stream goes on, or `None` to drop it.
    pub fn rewrite(&mut self, ev: Event) -> Option<Event> {
        let ev = self.placed(ev)?;
        if !self.trim_lead {
            return Some(ev);
        }
        match lead_trimmed(self.format, &ev) {
            Some((e, false)) => Some(e),
            Some((e, true)) => {
                self.trim_lead = false;
                Some(e)
            }
            None => Some(ev),
        }
    }

    fn placed(&mut self, ev: Event) -> Option<Event> {
        if let Some(r) = self.responses.as_mut() {
            let Some(v) = ev.json() else {
                return Some(ev); // a comment: keepalives go through
            };
            return r.rewrite(v).map(|v| rewritten(&ev, &v));
        }
        match self.format {
            StreamFormat::Chat => {
                if !self.started && dialect::is_preamble(StreamFormat::Chat, &ev) {
                    return None;
                }
                self.started = true;
                Some(ev)
            }
            StreamFormat::Messages => self.messages(ev),
            _ => Some(ev),
        }
    }

    fn messages(&mut self, ev: Event) -> Option<Event> {
        let kind = ev.kind().map(str::to_string);
        match kind.as_deref() {
            Some("message_start" | "ping") => None,
            Some("content_block_start") => {
                let index = ev.json()?.get("index")?.as_u64()?;
                let first = self.offset.is_none();
                let offset = *self.offset.get_or_insert(self.base as i64 - index as i64);
                let text = ev.json()?["content_block"]["type"] == "text";
                if first && text && self.open.is_some() {
                    return None; // the continuation's first text goes on in the open block
                }
                reindexed(&ev, offset)
            }
            Some("content_block_delta" | "content_block_stop") => {
                let offset = *self.offset.get_or_insert(0);
                reindexed(&ev, offset)
            }
            _ => Some(ev),
        }
    }
}

/// `ev` with its `index` moved by `offset` (the event written anew).
fn reindexed(ev: &Event, offset: i64) -> Option<Event> {
    if offset == 0 {
        return Some(ev.clone());
    }
    let mut event_json = ev.json()?.clone();
    let index = event_json.get("index")?.as_i64()? + offset;
    event_json["index"] = Value::from(index.max(0));
    Some(rewritten(ev, &event_json))
}

/// `ev` written anew with `v` as its data (its event name kept).
fn rewritten(ev: &Event, v: &Value) -> Event {
    let data = v.to_string();
    let name = ev.name.clone();
    let raw = match &name {
        Some(n) => format!("event: {n}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    };
    Event::new(Bytes::from(raw), name, Some(data), false)
}

/// A text delta with its leading white space removed: the event, and whether any text was
/// left (the trim is over). `None`: not a text delta.
fn lead_trimmed(format: StreamFormat, ev: &Event) -> Option<(Event, bool)> {
    let mut v = ev.json()?.clone();
    let slot = match format {
        StreamFormat::Messages if v["delta"]["type"] == "text_delta" => &mut v["delta"]["text"],
        StreamFormat::Chat if v["choices"][0]["delta"]["content"].is_string() => {
            &mut v["choices"][0]["delta"]["content"]
        }
        StreamFormat::Responses if v["type"] == "response.output_text.delta" => &mut v["delta"],
        _ => return None,
    };
    let text = slot.as_str()?;
    let rest = text.trim_start();
    if rest.len() == text.len() {
        return Some((ev.clone(), !rest.is_empty()));
    }
    let left = !rest.is_empty();
    *slot = Value::from(rest);
    Some((rewritten(ev, &v), left))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, data: &str) -> Event {
        Event::new(
            Bytes::from(format!("event: {name}\ndata: {data}\n\n")),
            Some(name.into()),
            Some(data.into()),
            false,
        )
    }

    #[test]
    fn delivery_follows_text_and_rules_out_other_parts() {
        let mut d = Delivery::new();
        d.observe(StreamFormat::Messages, &named("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#));
        d.observe(StreamFormat::Messages, &named("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, "}}"#));
        assert!(d.resumable());
        assert_eq!((d.text.as_str(), d.open), ("Hello, ", Some(0)));
        d.observe(
            StreamFormat::Messages,
            &named(
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
        );
        d.observe(StreamFormat::Messages, &named("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#));
        assert!(!d.resumable(), "a tool call never resumes");
        let mut c = Delivery::new();
        c.observe(
            StreamFormat::Chat,
            &Event::data(r#"{"choices":[{"delta":{"content":"ab"}}]}"#),
        );
        assert!(c.resumable());
        c.observe(
            StreamFormat::Chat,
            &Event::data(r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#),
        );
        assert!(!c.resumable());
    }

    #[test]
    fn the_prefill_is_the_last_assistant_turn() {
        let b = br#"{"model":"m","messages":[{"role":"user","content":"q"}]}"#;
        let v: Value = serde_json::from_slice(
            &with_prefill(PathFamily::Messages, b, "Once upon ", true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            v["messages"][1],
            serde_json::json!({"role": "assistant", "content": "Once upon"})
        );
        let own =
            br#"{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"A: "}]}"#;
        let v: Value =
            serde_json::from_slice(&with_prefill(PathFamily::Chat, own, "x y ", false).unwrap())
                .unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 2);
        assert_eq!(v["messages"][1]["content"], "A: x y ");
        assert!(with_prefill(PathFamily::Embeddings, b, "x", false).is_none());
    }

    /// The continuation's opening is dropped, its first text block continues the client's
    /// open one, and later blocks move onto the client's indexes.
    #[test]
    fn an_anthropic_continuation_goes_on_in_the_open_block() {
        let mut d = Delivery::new();
        d.open = Some(2);
        d.next_index = 2;
        d.text = "x".into();
        let mut s = Splice::new(StreamFormat::Messages, &d, false);
        assert!(s
            .rewrite(named(
                "message_start",
                r#"{"type":"message_start","message":{}}"#
            ))
            .is_none());
        assert!(s.rewrite(named("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#)).is_none());
        let delta = s.rewrite(named("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"y"}}"#)).unwrap();
        assert_eq!(delta.json().unwrap()["index"], 2);
        let stop = s
            .rewrite(named(
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ))
            .unwrap();
        assert_eq!(stop.json().unwrap()["index"], 2);
        let next = s.rewrite(named("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#)).unwrap();
        assert_eq!(next.json().unwrap()["index"], 3);
        assert!(
            String::from_utf8_lossy(&next.raw).starts_with("event: content_block_start\ndata: ")
        );
        let end = named("message_stop", r#"{"type":"message_stop"}"#);
        assert_eq!(s.rewrite(end.clone()), Some(end));
    }

    #[test]
    fn a_chat_continuation_loses_only_its_role_chunk() {
        let mut s = Splice::new(StreamFormat::Chat, &Delivery::new(), false);
        let role =
            Event::data(r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#);
        assert!(s.rewrite(role).is_none());
        let text = Event::data(r#"{"choices":[{"index":0,"delta":{"content":"more"}}]}"#);
        assert_eq!(s.rewrite(text.clone()), Some(text));
    }
}
