//! One attempt on a channel of another wire format (R16.1, R16.2): which attempts are
//! translated, the upstream request body and path, the answer (JSON or stream) and the error
//! in the client's format. The conversion itself is `wire::translate` (pure); this module
//! applies it to one exchange so that everything downstream — commit point, hidden errors,
//! `stream_incomplete`, usage and billing — reads the client's own format as if the upstream
//! had spoken it.
//!
//! Classification never sees a translated status: a failed attempt is classified on the
//! upstream's real status and body, and its answer is translated only when it is relayed.
//!
//! A Responses client (`/v1/responses`, R16.4) is translated like an OpenAI one whose
//! request, answer and stream go through `wire::translate::responses`; its error bodies
//! have OpenAI's shape, so `client` is `OpenAi` and `responses` says the rest.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};

use crate::config::model::{Channel, ChannelKind, ReasoningChoice, ResponsesMode};
use crate::error::{ClientFormat, GatewayError};
use crate::relay::attempt::exchange::UpstreamFailure;
use crate::routing::family::PathFamily;
use crate::routing::policy::{Outcome, TransportKind};
use crate::state::ChannelState;
use crate::telemetry;
use crate::upstream::body::Transform;
use crate::wire::dialect::{self, StreamFormat};
use crate::wire::sse::Framer;
use crate::wire::translate::responses::{answer_from, request_to, ResponsesStream};
use crate::wire::translate::{
    translate_answer, translate_error, translate_request, AnswerOptions, ReasoningHistory,
    RequestOptions, StreamStep, StreamTranslator, UpstreamError, WireFormat,
};
use crate::wire::usage::Usage;

/// A translated attempt: the client's format and the upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xlate {
    pub client: WireFormat,
    pub upstream: WireFormat,
    /// The client speaks the Responses API (`client` is then `OpenAi`).
    pub responses: bool,
}

/// The wire format of a channel kind (Azure speaks OpenAI's).
pub fn channel_format(kind: ChannelKind) -> WireFormat {
    match kind {
        ChannelKind::OpenAi | ChannelKind::Azure => WireFormat::OpenAi,
        ChannelKind::Anthropic => WireFormat::Anthropic,
        ChannelKind::Gemini => WireFormat::Gemini,
    }
}

/// The attempt's translation, when a request of `family` goes to a channel of `kind` that
/// speaks another format (chat completions and messages; responses as `responses: auto`
/// has it, see `of_channel`).
pub fn of(family: PathFamily, kind: ChannelKind) -> Option<Xlate> {
    let client = match family {
        PathFamily::Chat => WireFormat::OpenAi,
        PathFamily::Messages => WireFormat::Anthropic,
        PathFamily::Responses => return responses(kind, ResponsesMode::Auto),
        _ => return None,
    };
    let upstream = channel_format(kind);
    (client != upstream).then_some(Xlate {
        client,
        upstream,
        responses: false,
    })
}

/// `of` for a channel, with its `responses` mode: `chat` translates Responses to Chat
/// Completions on an OpenAI-format channel.
pub fn of_channel(family: PathFamily, ch: &Channel) -> Option<Xlate> {
    match family {
        PathFamily::Responses => responses(ch.kind, ch.responses),
        _ => of(family, ch.kind),
    }
}

/// `of_channel` for one attempt at `now`: an `openai` channel left at `responses: auto` that
/// was found not to serve `/v1/responses` (`state::responses_path`) gets Responses requests
/// translated to Chat Completions while the mark lasts.
pub fn of_attempt(
    family: PathFamily,
    ch: &Channel,
    st: &ChannelState,
    now: tokio::time::Instant,
) -> Option<Xlate> {
    if family == PathFamily::Responses && discovers(ch) && st.responses_path.chat_only(now) {
        return responses(ch.kind, ResponsesMode::Chat);
    }
    of_channel(family, ch)
}

/// Hosts known to serve the Responses API: a 404 there is a real one, never a missing path.
const NATIVE_RESPONSES_HOSTS: &[&str] = &["api.openai.com"];

/// Whether a 404 for `/v1/responses` on `ch` may mean that the server lacks the path (issue
/// 28): an `openai` channel left at `responses: auto`, on a host not known to serve it.
/// `azure` channels are taken at their word (Azure's 404 names a deployment).
pub fn discovers(ch: &Channel) -> bool {
    ch.kind == ChannelKind::OpenAi
        && ch.responses == ResponsesMode::Auto
        && !NATIVE_RESPONSES_HOSTS.contains(&ch.base_url.authority.host())
}

/// A Responses request's translation on a channel of `kind` in `mode` (R16.4): Anthropic and
/// Gemini channels translate (`auto`), OpenAI-format ones only when `chat`; `native` and
/// `auto` forward it there as it is.
fn responses(kind: ChannelKind, mode: ResponsesMode) -> Option<Xlate> {
    let upstream = channel_format(kind);
    let translated = match mode {
        ResponsesMode::Chat => true,
        ResponsesMode::Auto => upstream != WireFormat::OpenAi,
        ResponsesMode::Native | ResponsesMode::Off => false,
    };
    translated.then_some(Xlate {
        client: WireFormat::OpenAi,
        upstream,
        responses: true,
    })
}

impl Xlate {
    /// `openai->anthropic`, as the request log shows it.
    pub fn label(self) -> String {
        let client = if self.responses {
            "responses"
        } else {
            self.client.label()
        };
        format!("{client}->{}", self.upstream.label())
    }

    /// The path the upstream's format uses (Gemini's is chosen by its provider).
    pub fn upstream_path(self) -> &'static str {
        match self.upstream {
            WireFormat::OpenAi => "/v1/chat/completions",
            WireFormat::Anthropic => "/v1/messages",
            WireFormat::Gemini => "/v1/models",
        }
    }

    fn wire_format(self) -> ClientFormat {
        match self.client {
            WireFormat::Anthropic => ClientFormat::Anthropic,
            WireFormat::OpenAi | WireFormat::Gemini => ClientFormat::OpenAi,
        }
    }

    /// The upstream request body for the client's `body` (already model-rewritten and
    /// stream-planned) on channel `ch`; `Err`: the refusal naming the field (a local skip of
    /// this target, R16.1).
    pub fn request(self, body: &[u8], model: &str, ch: &Channel) -> Result<Prepared, Box<Refused>> {
        let opts = RequestOptions {
            max_tokens_field: crate::relay::attempt::compat::max_tokens_field(ch, model),
            reasoning_history: match ch.reasoning_history {
                ReasoningChoice::Auto => ReasoningHistory::Auto,
                ReasoningChoice::ReasoningContent => ReasoningHistory::ReasoningContent,
                ReasoningChoice::Drop => ReasoningHistory::Drop,
            },
            ..RequestOptions::new(model)
        };
        let prepared = if self.responses {
            request_to(self.upstream, body, &opts).map(|r| {
                for f in &r.dropped {
                    metrics::counter!(telemetry::TRANSLATION_DROPPED, "field" => f.clone())
                        .increment(1);
                }
                Prepared {
                    body: Bytes::from(self.without_usage_option(r.body, ch)),
                    stream: r.stream,
                    include_usage: false,
                }
            })
        } else {
            translate_request(self.client, self.upstream, body, &opts).map(|prepared| {
                count_dropped(&prepared.dropped);
                Prepared {
                    body: Bytes::from(self.without_usage_option(prepared.body, ch)),
                    stream: prepared.stream,
                    include_usage: prepared.include_usage,
                }
            })
        };
        match prepared {
            Ok(p) => Ok(p),
            Err(e) => {
                let error = GatewayError::bad_request(e.code(), e.to_string());
                Err(Box::new(Refused {
                    reason: e.to_string(),
                    status: 400,
                    outcome: Outcome::Status {
                        code: 400,
                        error_code: Some(e.code().to_string()),
                        error_type: Some("invalid_request_error".into()),
                        message: e.to_string(),
                    },
                    body: error.body(self.wire_format()),
                }))
            }
        }
    }

    /// `include_usage: false` on an OpenAI-format channel (a server that refuses
    /// `stream_options`) holds for translated requests too: the option is taken out, and the
    /// stream's usage is then estimated from what was relayed (`usage_estimated`).
    fn without_usage_option(self, body: Vec<u8>, ch: &Channel) -> Vec<u8> {
        if self.upstream != WireFormat::OpenAi || ch.include_usage {
            return body;
        }
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(mut v) if v.get("stream_options").is_some() => {
                if let Some(o) = v.as_object_mut() {
                    o.remove("stream_options");
                }
                serde_json::to_vec(&v).unwrap_or(body)
            }
            _ => body,
        }
    }

    /// An upstream error answer (`status` after the channel's mapping) in the client's
    /// format: its status and body.
    pub fn error(self, status: u16, body: &[u8]) -> (u16, Bytes) {
        let translated = translate_error(self.upstream, status, body, self.client);
        (translated.status, Bytes::from(translated.body))
    }

    /// A 200 JSON answer in the client's format with its usage; `Err`: an error the answer
    /// carried (a hidden error, a safety block, an answer that cannot be expressed).
    pub fn answer(self, body: &[u8], request_id: &str) -> Result<(Bytes, Usage), Box<Refused>> {
        let opts = answer_options(request_id);
        let answer = if self.responses {
            answer_from(self.upstream, body, &opts)
        } else {
            translate_answer(self.upstream, self.client, body, &opts)
        };
        match answer {
            Ok(answer) => {
                let usage = Usage::from_body(&answer.body).unwrap_or_default();
                Ok((Bytes::from(answer.body), usage))
            }
            Err(e) => Err(Box::new(Refused {
                reason: e.message.clone(),
                status: e.client_status(self.client),
                outcome: error_outcome(&e),
                body: Bytes::from(e.body(self.client)),
            })),
        }
    }

    /// The transform that turns the upstream's SSE stream into the client's.
    pub fn stream(self, include_usage: bool, request_id: &str) -> Box<dyn Transform> {
        let opts = answer_options(request_id);
        let (tr, format) = if self.responses {
            let tr = Tr::Responses(Box::new(ResponsesStream::new(self.upstream, &opts)));
            (tr, StreamFormat::Responses)
        } else {
            let tr = StreamTranslator::new(self.upstream, self.client, &opts, include_usage);
            let format = match self.client {
                WireFormat::Anthropic => StreamFormat::Messages,
                WireFormat::OpenAi | WireFormat::Gemini => StreamFormat::Chat,
            };
            (Tr::Chat(tr), format)
        };
        Box::new(SseXlate {
            keepalive: dialect::keepalive(format),
            framer: Framer::new(false),
            tr,
            held: Vec::new(),
            committed: false,
            opened: false,
            dead: false,
        })
    }
}

/// R16.3: each dropped field is counted, and logged once per process at debug (the
/// fields are advisory; a log line per request would be noise).
fn count_dropped(fields: &[&'static str]) {
    static LOGGED: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    for f in fields {
        metrics::counter!(telemetry::TRANSLATION_DROPPED, "field" => *f).increment(1);
        let first = {
            let mut seen = crate::lock::lock(&LOGGED);
            let first = !seen.contains(f);
            if first {
                seen.push(f);
            }
            first
        };
        if first {
            tracing::debug!(field = f, "translation dropped an advisory field the target cannot express (counted from now on, not logged again)");
        }
    }
}

/// The upstream side of a translated request.
pub struct Prepared {
    pub body: Bytes,
    /// The upstream is asked for a stream (Gemini's method).
    pub stream: bool,
    /// An OpenAI client's stream carries the usage chunk (possibly hidden from the client).
    pub include_usage: bool,
}

/// A translated attempt that failed on the gateway's side of the translation: the outcome to
/// classify and the client-format body to answer with.
pub struct Refused {
    pub outcome: Outcome,
    /// What could not be expressed, for the log.
    pub reason: String,
    /// The client's status and body.
    pub status: u16,
    pub body: Bytes,
}

impl Refused {
    /// The failure to relay if nothing succeeds (already in the client's format).
    pub fn failure(&self, headers: HeaderMap) -> UpstreamFailure {
        UpstreamFailure {
            status: self.status,
            headers: json_headers(headers),
            body: self.body.clone(),
            translate: None,
            client_status: Some(self.status),
        }
    }
}

/// Headers for a translated JSON body (the upstream's length and type no longer hold).
pub fn json_headers(mut h: HeaderMap) -> HeaderMap {
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::CONTENT_ENCODING);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h
}

/// The outcome an error carried by a 200 stands for: its status, for the classifier.
fn error_outcome(e: &UpstreamError) -> Outcome {
    Outcome::Status {
        code: e.status,
        error_code: e.code.clone(),
        error_type: None,
        message: e.message.clone(),
    }
}

fn answer_options(request_id: &str) -> AnswerOptions<'_> {
    AnswerOptions {
        created: (crate::clock::now_ms().max(0) / 1000) as u64,
        id_seed: request_id,
        model: None,
    }
}

/// A translated stream (see `Xlate::stream`). What the translator writes before the first
/// content is held, so the relay's commit point is the first content (or the end); an error
/// before content replaces it with one error event carrying the upstream's status, which
/// the relay's hidden-error check turns into a failed attempt (R9.5).
struct SseXlate {
    /// The client format's keepalive (a comment, or Anthropic's `ping`).
    keepalive: Bytes,
    framer: Framer,
    tr: Tr,
    held: Vec<u8>,
    committed: bool,
    /// The opening comment was written (see `dialect::OPENING_COMMENT`).
    opened: bool,
    /// A hidden error was written: nothing more.
    dead: bool,
}

/// The translator of one stream: to a chat format, or to Responses events.
enum Tr {
    Chat(StreamTranslator),
    Responses(Box<ResponsesStream>),
}

impl Tr {
    fn feed(&mut self, event: Option<&str>, data: &str, out: &mut Vec<u8>) -> StreamStep {
        match self {
            Tr::Chat(t) => t.feed(event, data, out),
            Tr::Responses(t) => t.feed(event, data, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> StreamStep {
        match self {
            Tr::Chat(t) => t.finish(out),
            Tr::Responses(t) => t.finish(out),
        }
    }

    fn malformed_dropped(&self) -> u64 {
        match self {
            Tr::Chat(t) => t.malformed_dropped(),
            Tr::Responses(t) => t.malformed_dropped(),
        }
    }
}

impl Transform for SseXlate {
    fn chunk(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        self.framer.push(data);
        self.drain(out);
        if self.framer.overflowed() {
            return Err("upstream event too large".into());
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<u8>) {
        self.framer.finish();
        self.drain(out);
        let mut buf = Vec::new();
        let step = self.tr.finish(&mut buf);
        self.take(step, buf, out);
    }
}

impl SseXlate {
    fn drain(&mut self, out: &mut Vec<u8>) {
        while let Some(ev) = self.framer.next_event() {
            let data = ev.data.as_deref().unwrap_or("");
            let mut buf = Vec::new();
            let malformed = self.tr.malformed_dropped();
            let step = if ev.comment_only || data.is_empty() {
                StreamStep::default()
            } else {
                self.tr.feed(ev.name.as_deref(), data, &mut buf)
            };
            if self.tr.malformed_dropped() > malformed {
                metrics::counter!(telemetry::MALFORMED_EVENTS).increment(1);
            }
            let keepalive = ev.comment_only || ev.name.as_deref() == Some("ping");
            let (before, was_committed) = (out.len(), self.committed);
            self.take(step, buf, out);
            if out.len() == before && !self.dead && (!was_committed || keepalive) {
                // Before the commit point every upstream event counts for the first-byte
                // gate, held or not: a comment (the relay drops it, so nothing precedes
                // the held opening). After it an upstream keepalive still proves the
                // upstream alive (the idle gate): passed on as the client's keepalive.
                if was_committed {
                    out.extend_from_slice(&self.keepalive);
                } else if !self.held.is_empty() && !self.opened {
                    // The opening is held: the upstream has proven alive (R9.2 hand-over).
                    self.opened = true;
                    out.extend_from_slice(dialect::OPENING_COMMENT);
                } else {
                    out.extend_from_slice(b": keepalive\n\n");
                }
            }
        }
    }

    fn take(&mut self, step: StreamStep, buf: Vec<u8>, out: &mut Vec<u8>) {
        if self.dead {
            return;
        }
        if self.committed {
            out.extend_from_slice(&buf);
            return;
        }
        if let Some(e) = step.error.as_ref().filter(|_| step.error_before_content) {
            self.held.clear();
            self.dead = true;
            let ev = serde_json::json!({"error": {
                "message": e.message, "type": e.client_type(WireFormat::Anthropic), "code": e.status,
            }});
            out.extend_from_slice(format!("data: {ev}\n\n").as_bytes());
            return;
        }
        self.held.extend_from_slice(&buf);
        if step.content || step.terminal || step.error.is_some() {
            out.append(&mut self.held);
            self.committed = true;
        }
    }
}

/// A translated body the gateway cannot relay as it came (not SSE or JSON, or too large to
/// translate): a broken answer, for another channel to do better.
pub fn untranslatable() -> Outcome {
    Outcome::Transport(TransportKind::Broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"c\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n";
    const PING: &str = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
    const OVERLOADED: &str = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    const TEXT: &str = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n";

    fn xlate() -> Box<dyn Transform> {
        let x = of(PathFamily::Chat, ChannelKind::Anthropic).unwrap();
        x.stream(true, "req1")
    }

    /// Fed byte by byte: what the relay's framer will see.
    fn feed(t: &mut dyn Transform, s: &str) -> String {
        let mut out = Vec::new();
        for b in s.as_bytes() {
            t.chunk(std::slice::from_ref(b), &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn nothing_before_content_but_keepalives() {
        let mut t = xlate();
        let out = feed(t.as_mut(), &format!("{START}{PING}"));
        assert_eq!(
            out, ": opening\n\n: keepalive\n\n",
            "the role chunk is held; each event still counts for the first-byte gate"
        );
        let out = feed(t.as_mut(), TEXT);
        assert!(out.contains("\"role\":\"assistant\""), "{out}");
        assert!(out.contains("\"content\":\"hi\""), "{out}");
        assert!(
            out.find("assistant") < out.find("\"hi\""),
            "held first: {out}"
        );
        let mut end = Vec::new();
        t.end(&mut end);
        assert!(
            end.is_empty(),
            "cut before message_stop: the relay says incomplete"
        );
    }

    #[test]
    fn an_error_before_content_is_one_hidden_error_with_the_upstream_status() {
        let mut t = xlate();
        let out = feed(t.as_mut(), &format!("{START}{PING}{OVERLOADED}{TEXT}"));
        let events: Vec<&str> = out.split("\n\n").filter(|e| !e.is_empty()).collect();
        assert_eq!(events.len(), 3, "{out}");
        let last = events[2].strip_prefix("data: ").unwrap();
        let v: serde_json::Value = serde_json::from_str(last).unwrap();
        assert_eq!(v["error"]["code"], 529, "{v}");
        assert_eq!(
            crate::wire::hidden::embedded_error(&v),
            Some(Some(529)),
            "the relay's hidden-error check reads it"
        );
    }
}
