//! Writing `chat.completion.chunk` events: the role chunk, `content` / `reasoning_content`
//! deltas, tool calls (`id`, `type` and `name` only in the first fragment of each index), the
//! finish chunk, the usage chunk (`choices: []`) when the client asked `include_usage`, and
//! `data: [DONE]`.

use super::super::ids::IdGen;
use super::super::ir::Stop;
use super::super::stop;
use super::super::upstream_error::UpstreamError;
use super::super::usage::Usage;
use super::super::WireFormat;
use super::emit::{json_str, sse, Counters, Emit};

pub(crate) struct OpenAiEmit {
    created: u64,
    model_override: Option<String>,
    include_usage: bool,
    ids: IdGen,
    /// `{"id":…,"object":"chat.completion.chunk","created":…,"model":…` — every chunk's head.
    head: Vec<u8>,
    started: bool,
    counters: Counters,
    buf: Vec<u8>,
}

impl OpenAiEmit {
    pub fn new(created: u64, model: Option<&str>, include_usage: bool, ids: IdGen) -> Self {
        OpenAiEmit {
            created,
            model_override: model.map(str::to_string),
            include_usage,
            ids,
            head: Vec::new(),
            started: false,
            counters: Counters::default(),
            buf: Vec::with_capacity(256),
        }
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.start("", "", &Usage::default(), out);
        }
    }

    /// One chunk with choice 0: `delta` is raw JSON, `finish` the finish reason or null.
    fn chunk(&mut self, delta: &[u8], finish: Option<&str>, out: &mut Vec<u8>) {
        self.buf.clear();
        self.buf.extend_from_slice(&self.head);
        self.buf
            .extend_from_slice(br#","choices":[{"index":0,"delta":"#);
        self.buf.extend_from_slice(delta);
        self.buf
            .extend_from_slice(br#","logprobs":null,"finish_reason":"#);
        match finish {
            Some(f) => json_str(&mut self.buf, f),
            None => self.buf.extend_from_slice(b"null"),
        }
        self.buf.extend_from_slice(b"}]");
        if self.include_usage {
            // The reference: every chunk but the last carries `usage: null` when asked.
            self.buf.extend_from_slice(br#","usage":null"#);
        }
        self.buf.push(b'}');
        sse(out, None, &self.buf);
    }

    /// A delta with one string field.
    fn delta_str(&mut self, key: &str, value: &str, out: &mut Vec<u8>) {
        let mut data = Vec::with_capacity(value.len() + key.len() + 8);
        data.push(b'{');
        json_str(&mut data, key);
        data.push(b':');
        json_str(&mut data, value);
        data.push(b'}');
        self.chunk(&data, None, out);
    }
}

impl Emit for OpenAiEmit {
    fn start(&mut self, id: &str, model: &str, _usage: &Usage, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let model = self.model_override.as_deref().unwrap_or(model);
        let mut head = Vec::with_capacity(128);
        head.extend_from_slice(br#"{"id":"#);
        json_str(&mut head, &self.ids.message_id(id));
        head.extend_from_slice(br#","object":"chat.completion.chunk","created":"#);
        head.extend_from_slice(self.created.to_string().as_bytes());
        head.extend_from_slice(br#","model":"#);
        json_str(&mut head, model);
        self.head = head;
        self.chunk(br#"{"role":"assistant","content":""}"#, None, out);
    }

    fn text(&mut self, t: &str, out: &mut Vec<u8>) {
        if t.is_empty() {
            return;
        }
        self.ensure_started(out);
        self.counters.content += 1;
        self.counters.chars += t.chars().count() as u64;
        self.delta_str("content", t, out);
    }

    fn thinking(&mut self, t: &str, out: &mut Vec<u8>) {
        if t.is_empty() {
            return;
        }
        self.ensure_started(out);
        self.counters.content += 1;
        self.counters.chars += t.chars().count() as u64;
        self.delta_str("reasoning_content", t, out);
    }

    fn tool_start(&mut self, k: usize, id: &str, name: &str, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.counters.content += 1;
        let mut data = Vec::with_capacity(96 + id.len() + name.len());
        data.extend_from_slice(br#"{"tool_calls":[{"index":"#);
        data.extend_from_slice(k.to_string().as_bytes());
        data.extend_from_slice(br#","id":"#);
        json_str(&mut data, &self.ids.client_id(id, k));
        data.extend_from_slice(br#","type":"function","function":{"name":"#);
        json_str(&mut data, name);
        data.extend_from_slice(br#","arguments":""}}]}"#);
        self.chunk(&data, None, out);
    }

    fn tool_args(&mut self, k: usize, fragment: &str, out: &mut Vec<u8>) {
        if fragment.is_empty() {
            return;
        }
        self.ensure_started(out);
        self.counters.chars += fragment.chars().count() as u64;
        let mut data = Vec::with_capacity(64 + fragment.len());
        data.extend_from_slice(br#"{"tool_calls":[{"index":"#);
        data.extend_from_slice(k.to_string().as_bytes());
        data.extend_from_slice(br#","function":{"arguments":"#);
        json_str(&mut data, fragment);
        data.extend_from_slice(b"}}]}");
        self.chunk(&data, None, out);
    }

    fn finish(&mut self, stop: Stop, _seq: Option<&str>, usage: &Usage, out: &mut Vec<u8>) {
        self.ensure_started(out);
        self.chunk(b"{}", Some(stop::to_openai(stop)), out);
        if self.include_usage {
            self.buf.clear();
            self.buf.extend_from_slice(&self.head);
            self.buf.extend_from_slice(br#","choices":[],"usage":"#);
            self.buf
                .extend_from_slice(usage.to_openai().to_string().as_bytes());
            self.buf.push(b'}');
            sse(out, None, &self.buf);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
        self.counters.closed = true;
    }

    fn error(&mut self, e: &UpstreamError, out: &mut Vec<u8>) {
        e.sse_event(WireFormat::OpenAi, out);
        self.counters.closed = true;
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}
