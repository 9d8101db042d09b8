//! The Responses answer's parts, shared by the non-stream answer and the stream: output items
//! (`message` with `output_text`, `function_call`, `reasoning` with its summary), the
//! `response` object with its `status` and `incomplete_details`, `usage`, and the ids in
//! Responses' own formats (`resp_…`, `msg_…`, `fc_…`, `rs_…`, made from the gateway's request
//! id).

use serde_json::{json, Map, Value};

use super::super::usage::Usage;
use super::tools::split;

/// One output item, as assembled from the upstream's answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Item {
    Message {
        text: String,
    },
    Reasoning {
        text: String,
    },
    Call {
        call_id: String,
        name: String,
        args: String,
    },
}

/// Which kind of item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Message,
    Reasoning,
    Call,
}

impl Item {
    pub fn kind(&self) -> Kind {
        match self {
            Item::Message { .. } => Kind::Message,
            Item::Reasoning { .. } => Kind::Reasoning,
            Item::Call { .. } => Kind::Call,
        }
    }

    /// The item's id: `msg_` / `rs_` / `fc_`, the seed and its position in `output`.
    pub fn id(&self, seed: &str, index: usize) -> String {
        let prefix = match self.kind() {
            Kind::Message => "msg",
            Kind::Reasoning => "rs",
            Kind::Call => "fc",
        };
        format!("{prefix}_{seed}_{index}")
    }

    /// The item as `output` holds it. `done: false` is the opening state of a stream
    /// (`in_progress`, no content yet); `status` is the closing one.
    pub fn to_json(&self, id: &str, status: &str) -> Value {
        match self {
            Item::Message { text } => json!({
                "id": id, "type": "message", "status": status, "role": "assistant",
                "content": [text_part(text)],
            }),
            Item::Reasoning { text } => json!({
                "id": id, "type": "reasoning", "summary": [summary_part(text)],
            }),
            Item::Call {
                call_id,
                name,
                args,
            } => call_json(id, status, call_id, name, args),
        }
    }

    /// The item as `response.output_item.added` opens it: no content yet.
    pub fn opening(&self, id: &str) -> Value {
        match self {
            Item::Message { .. } => json!({
                "id": id, "type": "message", "status": "in_progress", "role": "assistant",
                "content": [],
            }),
            Item::Reasoning { .. } => json!({"id": id, "type": "reasoning", "summary": []}),
            Item::Call { call_id, name, .. } => call_json(id, "in_progress", call_id, name, ""),
        }
    }
}

fn call_json(id: &str, status: &str, call_id: &str, name: &str, args: &str) -> Value {
    let (namespace, name) = split(name);
    let mut item = Map::new();
    item.insert("id".into(), id.into());
    item.insert("type".into(), "function_call".into());
    item.insert("status".into(), status.into());
    item.insert("arguments".into(), args.into());
    item.insert("call_id".into(), call_id.into());
    item.insert("name".into(), name.into());
    if let Some(ns) = namespace {
        item.insert("namespace".into(), ns.into());
    }
    Value::Object(item)
}

pub(super) fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

pub(super) fn summary_part(text: &str) -> Value {
    json!({"type": "summary_text", "text": text})
}

/// How the answer ended, from the Chat `finish_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Completed,
    /// `incomplete_details.reason`: `max_output_tokens` or `content_filter`.
    Incomplete(&'static str),
}

impl End {
    pub fn from_finish(finish: Option<&str>) -> End {
        match finish {
            Some("length") => End::Incomplete("max_output_tokens"),
            Some("content_filter") => End::Incomplete("content_filter"),
            _ => End::Completed,
        }
    }

    /// The status of output item `i` of `n`: only the last one can have been cut.
    pub fn item_status(self, i: usize, n: usize) -> &'static str {
        if i + 1 == n {
            self.status()
        } else {
            "completed"
        }
    }

    pub fn status(self) -> &'static str {
        match self {
            End::Completed => "completed",
            End::Incomplete(_) => "incomplete",
        }
    }
}

/// Responses `usage`: input with its cached part, output with its reasoning part.
pub(super) fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

/// The seed of every id of one answer: the request id's letters and digits.
pub(super) fn seed(id_seed: &str) -> String {
    let cleaned: String = id_seed
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(48)
        .collect();
    if cleaned.is_empty() {
        "0".into()
    } else {
        cleaned
    }
}

/// The facts every `response` object of one answer repeats.
#[derive(Debug, Clone)]
pub(super) struct Head {
    pub id: String,
    pub created: u64,
    pub model: String,
}

impl Head {
    pub fn new(seed: &str, created: u64, model: &str) -> Head {
        Head {
            id: format!("resp_{seed}"),
            created,
            model: model.to_string(),
        }
    }

    /// The `response` object. `status`: `in_progress`, `completed`, `incomplete`, `failed`.
    pub fn object(
        &self,
        status: &str,
        output: Vec<Value>,
        usage: Option<&Usage>,
        end: Option<End>,
        error: Option<Value>,
    ) -> Value {
        let incomplete = match end {
            Some(End::Incomplete(reason)) => json!({ "reason": reason }),
            _ => Value::Null,
        };
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "error": error.unwrap_or(Value::Null),
            "incomplete_details": incomplete,
            "instructions": null,
            "max_output_tokens": null,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "store": false,
            "temperature": null,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": null,
            "truncation": "disabled",
            "usage": usage.map_or(Value::Null, usage_json),
            "user": null,
            "metadata": {},
        })
    }
}
