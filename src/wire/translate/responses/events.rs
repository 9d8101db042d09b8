//! Writing the Responses stream's typed events, each with its `sequence_number`: the
//! `response.created` / `response.in_progress` preamble, each output item opened
//! (`response.output_item.added`, its content or summary part), its deltas
//! (`response.output_text.delta`, `response.reasoning_summary_text.delta`,
//! `response.function_call_arguments.delta`) and closed (the `.done` events, then
//! `response.output_item.done`), and the terminal `response.completed`,
//! `response.incomplete` or `response.failed`.

use serde_json::{json, Value};

use super::super::upstream_error::{ErrorKind, UpstreamError};
use super::super::usage::Usage;
use super::super::WireFormat;
use super::output::{summary_part, text_part, End, Head, Item, Kind};
use super::tools::split;

/// The output of one streamed answer and the events written for it.
pub(super) struct Events {
    seq: u64,
    seed: String,
    items: Vec<Item>,
    /// The item whose deltas are being written (every earlier one is closed).
    open: Option<usize>,
    /// The output index of each upstream tool call, by its number `k`.
    calls: Vec<usize>,
}

impl Events {
    pub fn new(seed: String) -> Self {
        Events {
            seq: 0,
            seed,
            items: Vec::new(),
            open: None,
            calls: Vec::new(),
        }
    }

    /// One event: `type` and `sequence_number` first, then `fields`' members.
    fn event(&mut self, out: &mut Vec<u8>, kind: &str, fields: Value) {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\ndata: {\"type\":");
        // Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, kind);
        out.extend_from_slice(b",\"sequence_number\":");
        out.extend_from_slice(self.seq.to_string().as_bytes());
        self.seq += 1;
        let rest = fields.to_string();
        match rest.strip_prefix('{') {
            Some("}") | None => out.push(b'}'),
            Some(members) => {
                out.push(b',');
                out.extend_from_slice(members.as_bytes());
            }
        }
        out.extend_from_slice(b"\n\n");
    }

    /// `response.created` and `response.in_progress` (the preamble).
    pub fn preamble(&mut self, head: &Head, out: &mut Vec<u8>) {
        let response = head.object("in_progress", Vec::new(), None, None, None);
        self.event(out, "response.created", json!({ "response": response }));
        self.event(out, "response.in_progress", json!({ "response": response }));
    }

    fn id(&self, i: usize) -> String {
        self.items[i].id(&self.seed, i)
    }

    /// Open a new item of `item`'s kind (closing the open one).
    fn open_item(&mut self, item: Item, out: &mut Vec<u8>) -> usize {
        self.close(out);
        let index = self.items.len();
        self.items.push(item);
        self.open = Some(index);
        let id = self.id(index);
        let opening = self.items[index].opening(&id);
        self.event(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": opening}),
        );
        match self.items[index].kind() {
            Kind::Message => self.event(
                out,
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": text_part("")}),
            ),
            Kind::Reasoning => self.event(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": id, "output_index": index, "summary_index": 0, "part": summary_part("")}),
            ),
            Kind::Call => {}
        }
        index
    }

    /// The open item if it is of `kind`, else a new one.
    fn current(&mut self, kind: Kind, out: &mut Vec<u8>) -> usize {
        match self.open {
            Some(i) if self.items[i].kind() == kind => i,
            _ => {
                let item = match kind {
                    Kind::Message => Item::Message {
                        text: String::new(),
                    },
                    _ => Item::Reasoning {
                        text: String::new(),
                    },
                };
                self.open_item(item, out)
            }
        }
    }

    pub fn text(&mut self, t: &str, out: &mut Vec<u8>) {
        let index = self.current(Kind::Message, out);
        if let Item::Message { text } = &mut self.items[index] {
            text.push_str(t);
        }
        let id = self.id(index);
        self.event(
            out,
            "response.output_text.delta",
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": t, "logprobs": []}),
        );
    }

    pub fn reasoning(&mut self, t: &str, out: &mut Vec<u8>) {
        let index = self.current(Kind::Reasoning, out);
        if let Item::Reasoning { text } = &mut self.items[index] {
            text.push_str(t);
        }
        let id = self.id(index);
        self.event(
            out,
            "response.reasoning_summary_text.delta",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": t}),
        );
    }

    /// Tool call `k` starts (its upstream id and name).
    pub fn call_start(&mut self, call_id: &str, name: &str, out: &mut Vec<u8>) {
        let item = Item::Call {
            call_id: call_id.to_string(),
            name: name.to_string(),
            args: String::new(),
        };
        let index = self.open_item(item, out);
        self.calls.push(index);
    }

    /// An argument fragment of tool call `k`; one for a call already closed (no known server
    /// interleaves calls) cannot be written in this grammar: an unreadable answer.
    pub fn call_args(
        &mut self,
        k: usize,
        frag: &str,
        out: &mut Vec<u8>,
    ) -> Result<(), UpstreamError> {
        let index = match self.calls.get(k) {
            Some(&index) if self.open == Some(index) => index,
            _ => {
                return Err(UpstreamError::bad_answer(
                    WireFormat::OpenAi,
                    "a tool call's arguments continued after the next output began",
                ))
            }
        };
        if let Item::Call { args, .. } = &mut self.items[index] {
            args.push_str(frag);
        }
        let id = self.id(index);
        self.event(
            out,
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": frag}),
        );
        Ok(())
    }

    /// Close the open item: its `.done` events and `response.output_item.done`.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        self.close_as("completed", out);
    }

    /// Close the open item with the item `status` (`incomplete` when the answer was cut).
    fn close_as(&mut self, status: &str, out: &mut Vec<u8>) {
        let Some(i) = self.open.take() else { return };
        let id = self.id(i);
        let item = self.items[i].clone();
        match &item {
            Item::Message { text } => {
                self.event(
                    out,
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": i, "content_index": 0, "text": text, "logprobs": []}),
                );
                self.event(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": i, "content_index": 0, "part": text_part(text)}),
                );
            }
            Item::Reasoning { text } => {
                self.event(
                    out,
                    "response.reasoning_summary_text.done",
                    json!({"item_id": id, "output_index": i, "summary_index": 0, "text": text}),
                );
                self.event(
                    out,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": i, "summary_index": 0, "part": summary_part(text)}),
                );
            }
            Item::Call { name, args, .. } => {
                let (_, name) = split(name);
                let name = name.to_string();
                self.event(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": i, "name": name, "arguments": args}),
                );
            }
        }
        let done = item.to_json(&id, status);
        self.event(
            out,
            "response.output_item.done",
            json!({"output_index": i, "item": done}),
        );
    }

    fn output(&self, end: End) -> Vec<Value> {
        let n = self.items.len();
        self.items
            .iter()
            .enumerate()
            .map(|(i, it)| it.to_json(&it.id(&self.seed, i), end.item_status(i, n)))
            .collect()
    }

    /// The answer is complete: `response.completed`, or `response.incomplete` (length,
    /// content filter).
    pub fn finish(&mut self, head: &Head, end: End, usage: &Usage, out: &mut Vec<u8>) {
        let status = end.status();
        self.close_as(status, out);
        let response = head.object(status, self.output(end), Some(usage), Some(end), None);
        let kind = match end {
            End::Completed => "response.completed",
            End::Incomplete(_) => "response.incomplete",
        };
        self.event(out, kind, json!({ "response": response }));
    }

    /// The upstream failed: `response.failed` with the error's code and message.
    pub fn failed(
        &mut self,
        head: &Head,
        e: &UpstreamError,
        usage: Option<&Usage>,
        out: &mut Vec<u8>,
    ) {
        let error = json!({"code": error_code(e), "message": e.message});
        let response = head.object(
            "failed",
            self.output(End::Incomplete("")),
            usage,
            None,
            Some(error),
        );
        self.event(out, "response.failed", json!({ "response": response }));
    }
}

/// The Responses error code for an upstream error (Codex reads `rate_limit_exceeded`,
/// `insufficient_quota`, `context_length_exceeded`, `server_is_overloaded`).
fn error_code(error: &UpstreamError) -> String {
    match error.kind {
        ErrorKind::RateLimit => "rate_limit_exceeded".into(),
        ErrorKind::Billing => "insufficient_quota".into(),
        ErrorKind::Overloaded => "server_is_overloaded".into(),
        ErrorKind::ContentFilter => "content_filter".into(),
        ErrorKind::InvalidRequest => error
            .code
            .clone()
            .unwrap_or_else(|| "invalid_prompt".into()),
        _ => "server_error".into(),
    }
}
