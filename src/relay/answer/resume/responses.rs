//! Stream resume for a Responses client: what its open stream has shown (the response id,
//! the next sequence number, the open message item, the items it saw finished), the prefill
//! as a trailing assistant `message` item, and the splice that renumbers a continuation's
//! typed events into the client's stream — its first message going on in the client's open
//! item, its `.done` events and final `response.*` object carrying the whole text.

use serde_json::{json, Value};

/// A Responses stream as the client has seen it.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub response_id: Option<String>,
    pub next_seq: u64,
    /// The open message item: its output index, id and text so far.
    pub open: Option<(u64, String, String)>,
    /// The items the client saw finished (`response.output_item.done`), in order.
    pub done: Vec<Value>,
}

impl Seen {
    /// Follow one event (`text` gathers the answer's text); `false` when the event is not
    /// part of a text answer, which rules a resume out.
    pub fn observe(&mut self, v: &Value, text: &mut String) -> bool {
        if let Some(n) = v["sequence_number"].as_u64() {
            self.next_seq = n + 1;
        }
        match v["type"].as_str().unwrap_or("") {
            "response.created" | "response.in_progress" => {
                if let Some(id) = v["response"]["id"].as_str() {
                    self.response_id = Some(id.to_string());
                }
                true
            }
            "response.output_item.added" => {
                let item = &v["item"];
                let index = v["output_index"].as_u64().unwrap_or(self.done.len() as u64);
                let id = item["id"].as_str().unwrap_or_default().to_string();
                self.open = Some((index, id, String::new()));
                item["type"] == "message"
            }
            "response.content_part.added" | "response.content_part.done" => {
                v["part"]["type"] == "output_text"
            }
            "response.output_text.delta" => {
                let delta = v["delta"].as_str().unwrap_or_default();
                text.push_str(delta);
                if let Some(open) = &mut self.open {
                    open.2.push_str(delta);
                }
                true
            }
            "response.output_text.done" => true,
            "response.output_item.done" => {
                self.open = None;
                self.done.push(v["item"].clone());
                v["item"]["type"] == "message"
            }
            // Reasoning, function calls, refusals, annotations, anything newer.
            _ => false,
        }
    }
}

/// The Responses request with `text` as a trailing assistant `message` item (a string
/// `input` becomes its one user message first). `None` for a request bound to stored state
/// (`previous_response_id`): no other target holds that state.
pub fn with_prefill(v: &mut Value, text: &str) -> Option<()> {
    if !v["previous_response_id"].is_null() {
        return None;
    }
    let item = json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    });
    match v.get_mut("input")? {
        Value::String(s) => {
            let user = json!({"type": "message", "role": "user", "content": s.as_str()});
            v["input"] = json!([user, item]);
        }
        Value::Array(items) => items.push(item),
        _ => return None,
    }
    Some(())
}

/// Rewrites a continuation's Responses events to continue the client's stream.
#[derive(Debug)]
pub struct Splice {
    /// The client's stream, followed as the continuation goes on.
    seen: Seen,
    /// The items the client saw finished before the cut (the final output starts with them).
    before: Vec<Value>,
    /// The message item open at the cut: its output index, id and text before the cut.
    cut_open: Option<(u64, String, String)>,
    /// The continuation's output index that goes on in the client's open item.
    first: Option<u64>,
    /// Added to every other continuation output index.
    offset: Option<i64>,
}

impl Splice {
    pub fn new(seen: &Seen) -> Splice {
        Splice {
            seen: seen.clone(),
            before: seen.done.clone(),
            cut_open: seen.open.clone(),
            first: None,
            offset: None,
        }
    }

    /// The continuation's event renumbered into the client's stream, or `None` to drop it.
    pub fn rewrite(&mut self, v: &Value) -> Option<Value> {
        let kind = v["type"].as_str()?.to_string();
        if matches!(
            kind.as_str(),
            "response.created" | "response.in_progress" | "response.queued"
        ) {
            return None;
        }
        let mut v = v.clone();
        if let Some(n) = v["output_index"].as_u64() {
            if self.place(&kind, &v, n) {
                return None;
            }
            self.map_item(&kind, &mut v, n);
        }
        if let Some(r) = v.get_mut("response").filter(|r| r.is_object()) {
            self.whole_response(r);
        }
        if v.get("sequence_number").is_some() {
            v["sequence_number"] = Value::from(self.seen.next_seq);
        }
        let mut ignored = String::new();
        self.seen.observe(&v, &mut ignored);
        Some(v)
    }

    /// Decide where the continuation's items go at its first item; `true` drops the event
    /// (the opening of the item that goes on in the client's open one).
    fn place(&mut self, kind: &str, v: &Value, n: u64) -> bool {
        let done = self.before.len() as i64;
        if self.offset.is_none() {
            let open = self.cut_open.as_ref().map(|o| o.0 as i64);
            let offset = match open {
                Some(at)
                    if kind == "response.output_item.added" && v["item"]["type"] == "message" =>
                {
                    self.first = Some(n);
                    at - n as i64
                }
                Some(at) => at + 1 - n as i64,
                None => done - n as i64,
            };
            self.offset = Some(offset);
        }
        Some(n) == self.first
            && matches!(
                kind,
                "response.output_item.added" | "response.content_part.added"
            )
    }

    /// Move an event's item onto the client's numbering; the item that goes on in the
    /// client's open one takes its id and, in its `.done` events, the text before the cut.
    fn map_item(&mut self, kind: &str, v: &mut Value, n: u64) {
        let offset = self.offset.unwrap_or(0);
        v["output_index"] = Value::from((n as i64 + offset).max(0));
        if Some(n) != self.first {
            return;
        }
        let Some((_, id, before)) = self.cut_open.clone() else {
            return;
        };
        if v.get("item_id").is_some() {
            v["item_id"] = Value::from(id.as_str());
        }
        match kind {
            "response.output_text.done" => prepend(&mut v["text"], &before),
            "response.content_part.done" => prepend(&mut v["part"]["text"], &before),
            "response.output_item.done" => self.open_item(&mut v["item"], &id, &before),
            _ => {}
        }
    }

    fn open_item(&self, item: &mut Value, id: &str, before: &str) {
        item["id"] = Value::from(id);
        if let Some(part) = item["content"].as_array_mut().and_then(|c| c.first_mut()) {
            prepend(&mut part["text"], before);
        }
    }

    /// The final `response` object: the client's response id, and the whole output (the
    /// items finished before the cut, then the continuation's own, renumbered).
    fn whole_response(&self, r: &mut Value) {
        if let Some(id) = &self.seen.response_id {
            r["id"] = Value::from(id.as_str());
        }
        let Some(out) = r["output"].as_array() else {
            return;
        };
        if out.is_empty() {
            return;
        }
        // Items the splice already delivered, as the client saw them finished.
        let mine: Vec<Value> = self.seen.done[self.before.len()..].to_vec();
        let mut whole = self.before.clone();
        if mine.len() >= out.len() {
            whole.extend(mine);
        } else {
            whole.extend(mine.iter().cloned());
            whole.extend(out[mine.len()..].iter().cloned());
        }
        r["output"] = Value::Array(whole);
    }
}

fn prepend(slot: &mut Value, before: &str) {
    let after = slot.as_str().unwrap_or_default();
    *slot = Value::from(format!("{before}{after}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client saw `response.created`, its message item opened and "Hello, " before the
    /// cut; the continuation's own opening goes, its text lands in the client's item with
    /// the client's numbering, and the final object is the client's response, whole.
    #[test]
    fn a_continuation_goes_on_in_the_open_message_item() {
        let mut seen = Seen::default();
        let mut text = String::new();
        for v in [
            json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_client","output":[]}}),
            json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_c","type":"message","content":[]}}),
            json!({"type":"response.content_part.added","sequence_number":2,"item_id":"msg_c","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}),
            json!({"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_c","output_index":0,"content_index":0,"delta":"Hello, "}),
        ] {
            assert!(seen.observe(&v, &mut text));
        }
        assert_eq!(text, "Hello, ");
        let mut s = Splice::new(&seen);
        let cont = [
            json!({"type":"response.created","sequence_number":0,"response":{"id":"resp_other"}}),
            json!({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_o","type":"message","content":[]}}),
            json!({"type":"response.content_part.added","sequence_number":2,"item_id":"msg_o","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}),
            json!({"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_o","output_index":0,"content_index":0,"delta":"world"}),
            json!({"type":"response.output_text.done","sequence_number":4,"item_id":"msg_o","output_index":0,"content_index":0,"text":"world"}),
            json!({"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"msg_o","type":"message","content":[{"type":"output_text","text":"world"}]}}),
            json!({"type":"response.completed","sequence_number":6,"response":{"id":"resp_other","output":[{"id":"msg_o","type":"message","content":[{"type":"output_text","text":"world"}]}]}}),
        ];
        let out: Vec<Value> = cont.iter().filter_map(|v| s.rewrite(v)).collect();
        assert_eq!(
            out.len(),
            4,
            "created and the item's opening are dropped: {out:?}"
        );
        assert_eq!(out[0]["item_id"], "msg_c");
        assert_eq!(out[0]["sequence_number"], 4);
        assert_eq!(out[1]["text"], "Hello, world");
        assert_eq!(out[2]["item"]["id"], "msg_c");
        assert_eq!(out[2]["item"]["content"][0]["text"], "Hello, world");
        let done = &out[3];
        assert_eq!(done["sequence_number"], 7);
        assert_eq!(done["response"]["id"], "resp_client");
        assert_eq!(
            done["response"]["output"][0]["content"][0]["text"],
            "Hello, world"
        );
        assert_eq!(done["response"]["output"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_function_call_rules_a_resume_out_and_stored_state_takes_no_prefill() {
        let mut seen = Seen::default();
        let mut text = String::new();
        let call = json!({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc"}});
        assert!(!seen.observe(&call, &mut text));
        let mut bound = json!({"input":"q","previous_response_id":"resp_1"});
        assert!(with_prefill(&mut bound, "x").is_none());
        let mut plain = json!({"input":"q"});
        assert!(with_prefill(&mut plain, "So far").is_some());
        assert_eq!(plain["input"][0]["content"], "q");
        assert_eq!(plain["input"][1]["role"], "assistant");
        assert_eq!(plain["input"][1]["content"][0]["text"], "So far");
    }
}
