//! `force_non_stream` for `/v1/responses` (R9.6): a complete `response` object replayed as the
//! Responses API's named events, ending with `response.completed` (or the terminal event
//! its status names). Output items that are not objects are skipped.

use serde_json::{json, Value};

struct Out {
    text: String,
    seq: u64,
}

impl Out {
    fn event(&mut self, name: &str, mut value: Value) {
        value["type"] = json!(name);
        value["sequence_number"] = json!(self.seq);
        self.seq += 1;
        self.text.push_str("event: ");
        self.text.push_str(name);
        self.text.push_str("\ndata: ");
        self.text.push_str(&value.to_string());
        self.text.push_str("\n\n");
    }
}

/// The SSE text for the response object `v`, or `None` when it is not one.
pub fn responses(value: &Value) -> Option<String> {
    if !value.is_object() || !value["output"].is_array() {
        return None;
    }
    let mut out = Out {
        text: String::new(),
        seq: 0,
    };
    let mut created = value.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    created["usage"] = Value::Null;
    out.event("response.created", json!({"response": created.clone()}));
    out.event("response.in_progress", json!({"response": created}));
    let items = value["output"].as_array().into_iter().flatten();
    for (oi, item) in items.filter(|i| i.is_object()).enumerate() {
        item_events(&mut out, oi, item);
    }
    let terminal = match value["status"].as_str() {
        Some("failed") => "response.failed",
        Some("incomplete") => "response.incomplete",
        _ => "response.completed",
    };
    out.event(terminal, json!({"response": value}));
    Some(out.text)
}

fn item_events(out: &mut Out, oi: usize, item: &Value) {
    let id = item["id"].clone();
    let mut added = item.clone();
    let is_message = item["type"] == "message";
    if is_message {
        added["content"] = json!([]);
        added["status"] = json!("in_progress");
    }
    out.event(
        "response.output_item.added",
        json!({"output_index": oi, "item": added}),
    );
    if is_message {
        let parts = item["content"].as_array().into_iter().flatten();
        for (ci, part) in parts.filter(|p| p.is_object()).enumerate() {
            let at = json!({"item_id": id, "output_index": oi, "content_index": ci});
            let with = |extra: Value| {
                let mut event = at.clone();
                for (k, x) in extra.as_object().into_iter().flatten() {
                    event[k] = x.clone();
                }
                event
            };
            let mut empty = part.clone();
            if part["type"] == "output_text" {
                empty["text"] = json!("");
            }
            out.event("response.content_part.added", with(json!({"part": empty})));
            if let Some(t) = part["text"]
                .as_str()
                .filter(|_| part["type"] == "output_text")
            {
                out.event("response.output_text.delta", with(json!({"delta": t})));
                out.event("response.output_text.done", with(json!({"text": t})));
            }
            out.event("response.content_part.done", with(json!({"part": part})));
        }
    }
    out.event(
        "response.output_item.done",
        json!({"output_index": oi, "item": item}),
    );
}
