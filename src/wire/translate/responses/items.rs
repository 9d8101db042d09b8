//! Responses `input` (a string, or a list of items) as Chat Completions `messages`:
//! `message` items by role (`developer` and `system` as `system`), `function_call` items as
//! the assistant's `tool_calls`, `function_call_output` items as `tool` messages (images in
//! an output follow as a user message), `reasoning` items as the next assistant message's
//! `reasoning_content`. Item ids, statuses and client-private fields are dropped.

use serde_json::{json, Map, Value};

use super::super::refusal::{Path, TranslateError};
use super::request::string;
use super::tools::Namespaced;

/// The assistant message being assembled from neighbouring items.
#[derive(Default)]
struct Assistant {
    text: Vec<String>,
    calls: Vec<Value>,
    reasoning: Vec<String>,
}

struct Convo<'a> {
    out: &'a mut Vec<Value>,
    join: bool,
    asst: Assistant,
    /// Images returned by tool outputs: a user message after the run of `tool` messages.
    tool_images: Vec<Value>,
}

/// Append the messages of `input` to `out`. `join`: text-only content as one string.
pub(super) fn read(
    input: &Value,
    join: bool,
    names: &Namespaced,
    out: &mut Vec<Value>,
) -> Result<(), TranslateError> {
    let root = Path::ROOT;
    let at = root.key("input");
    if let Some(s) = input.as_str() {
        out.push(json!({"role": "user", "content": s}));
        return Ok(());
    }
    let list = input
        .as_array()
        .ok_or_else(|| TranslateError::invalid(at, "must be a string or an array of items"))?;
    let mut convo = Convo {
        out,
        join,
        asst: Assistant::default(),
        tool_images: Vec::new(),
    };
    for (i, item) in list.iter().enumerate() {
        convo.item(item, at.idx(i), names)?;
    }
    convo.flush_assistant();
    convo.flush_images();
    Ok(())
}

impl Convo<'_> {
    fn item(&mut self, item: &Value, at: Path, names: &Namespaced) -> Result<(), TranslateError> {
        if !item.is_object() {
            return Err(TranslateError::invalid(at, "must be an item object"));
        }
        let kind = match item["type"].as_str() {
            Some(k) => k,
            None if item.get("role").is_some() => "message",
            None => return Err(TranslateError::invalid(at.key("type"), "is required")),
        };
        match kind {
            "message" => self.message(item, at),
            "function_call" => {
                self.flush_images();
                let call = function_call(item, at, names)?;
                self.asst.calls.push(call);
                Ok(())
            }
            "function_call_output" => self.output(item, at),
            "reasoning" => {
                self.flush_images();
                if !self.asst.text.is_empty() || !self.asst.calls.is_empty() {
                    self.flush_assistant();
                }
                self.asst.reasoning.extend(reasoning_text(item));
                Ok(())
            }
            "item_reference" => Err(TranslateError::unsupported(
                at,
                "refers to an item stored by the upstream: this request can only go to a \
                 channel that serves the Responses API natively; send the item itself",
            )),
            k => Err(TranslateError::unsupported(
                at,
                format!(
                    "is a `{k}` item, which only OpenAI's Responses API runs; this channel \
                     serves Responses by translation (messages, function calls and their \
                     outputs, reasoning)"
                ),
            )),
        }
    }

    fn message(&mut self, item: &Value, at: Path) -> Result<(), TranslateError> {
        let role = string(&item["role"], at.key("role"))?;
        let cp = at.key("content");
        match role {
            "assistant" => {
                self.flush_images();
                if !self.asst.calls.is_empty() {
                    self.flush_assistant();
                }
                let text = assistant_text(&item["content"], cp)?;
                self.asst.text.push(text);
                Ok(())
            }
            "user" | "system" | "developer" => {
                self.flush_assistant();
                self.flush_images();
                let images = role == "user";
                let parts = parts(&item["content"], cp, images)?;
                let role = if images { "user" } else { "system" };
                let content = content(parts, self.join || !images);
                self.out.push(json!({"role": role, "content": content}));
                Ok(())
            }
            r => Err(TranslateError::invalid(
                at.key("role"),
                format!("is `{r}`; expected user, assistant, system or developer"),
            )),
        }
    }

    fn output(&mut self, item: &Value, at: Path) -> Result<(), TranslateError> {
        self.flush_assistant();
        let id = string(&item["call_id"], at.key("call_id"))?;
        let op = at.key("output");
        let text = match &item["output"] {
            Value::String(s) => s.clone(),
            v @ Value::Array(_) => {
                let mut texts = Vec::new();
                for part in parts(v, op, true)? {
                    match part["type"].as_str() {
                        Some("text") => texts.push(part["text"].as_str().unwrap_or("").to_string()),
                        _ => self.tool_images.push(part),
                    }
                }
                texts.join("\n\n")
            }
            _ => {
                return Err(TranslateError::invalid(
                    op,
                    "must be a string or a list of parts",
                ))
            }
        };
        self.out
            .push(json!({"role": "tool", "tool_call_id": id, "content": text}));
        Ok(())
    }

    fn flush_assistant(&mut self) {
        let assistant = std::mem::take(&mut self.asst);
        if assistant.text.is_empty() && assistant.calls.is_empty() {
            // Reasoning with nothing after it is not a turn any Chat server takes.
            return;
        }
        let mut message = Map::new();
        message.insert("role".into(), "assistant".into());
        let content = if assistant.text.is_empty() {
            Value::Null
        } else {
            assistant.text.join("\n\n").into()
        };
        message.insert("content".into(), content);
        if !assistant.calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(assistant.calls));
        }
        if !assistant.reasoning.is_empty() {
            // DeepSeek's thinking mode needs it back on a tool-call turn; others ignore it.
            message.insert(
                "reasoning_content".into(),
                assistant.reasoning.join("\n\n").into(),
            );
        }
        self.out.push(Value::Object(message));
    }

    fn flush_images(&mut self) {
        if self.tool_images.is_empty() {
            return;
        }
        let parts = std::mem::take(&mut self.tool_images);
        self.out.push(json!({"role": "user", "content": parts}));
    }
}

/// `{type: function_call, call_id, name, namespace?, arguments}` as a Chat tool call.
fn function_call(item: &Value, at: Path, names: &Namespaced) -> Result<Value, TranslateError> {
    let id = string(&item["call_id"], at.key("call_id"))?;
    let name = string(&item["name"], at.key("name"))?;
    let name = names.upstream_name(item["namespace"].as_str(), name);
    let args = match &item["arguments"] {
        Value::Null => "{}",
        v => string(v, at.key("arguments"))?,
    };
    Ok(json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
}

/// A reasoning item's text: its `content` (`reasoning_text`) if any, else its summary.
fn reasoning_text(item: &Value) -> Vec<String> {
    let texts = |key: &str| -> Vec<String> {
        item[key]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|x| x["text"].as_str())
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let content = texts("content");
    if content.is_empty() {
        texts("summary")
    } else {
        content
    }
}

/// An assistant message's text: a string, or `output_text` / `input_text` / `refusal` parts.
fn assistant_text(value: &Value, at: Path) -> Result<String, TranslateError> {
    if let Some(s) = value.as_str() {
        return Ok(s.to_string());
    }
    let list = value
        .as_array()
        .ok_or_else(|| TranslateError::invalid(at, "must be a string or a list of parts"))?;
    let mut texts = Vec::with_capacity(list.len());
    for (i, part) in list.iter().enumerate() {
        let pp = at.idx(i);
        let text = match part["type"].as_str() {
            Some("output_text" | "input_text") => string(&part["text"], pp.key("text"))?,
            Some("refusal") => string(&part["refusal"], pp.key("refusal"))?,
            _ => {
                return Err(TranslateError::unsupported(
                    pp,
                    "is not text; an assistant message translated to Chat Completions holds \
                     text only",
                ))
            }
        };
        texts.push(text.to_string());
    }
    Ok(texts.join(""))
}

/// User-side content parts as Chat parts: `input_text`, `input_image` (`images`), and
/// `input_file` with inline data.
fn parts(value: &Value, at: Path, images: bool) -> Result<Vec<Value>, TranslateError> {
    if let Some(s) = value.as_str() {
        return Ok(vec![json!({"type": "text", "text": s})]);
    }
    let list = value
        .as_array()
        .ok_or_else(|| TranslateError::invalid(at, "must be a string or a list of parts"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, part) in list.iter().enumerate() {
        let pp = at.idx(i);
        out.push(match part["type"].as_str() {
            Some("input_text" | "output_text" | "text") => {
                json!({"type": "text", "text": string(&part["text"], pp.key("text"))?})
            }
            Some("input_image") if images => image(part, pp)?,
            Some("input_file") if images => file(part, pp)?,
            Some(k @ ("input_image" | "input_file")) => {
                return Err(TranslateError::unsupported(
                    pp,
                    format!("is `{k}`; a system or developer message holds text only"),
                ))
            }
            Some(k) => {
                return Err(TranslateError::unsupported(
                    pp,
                    format!("is a `{k}` part; expected input_text, input_image or input_file"),
                ))
            }
            None => return Err(TranslateError::invalid(pp.key("type"), "is required")),
        });
    }
    Ok(out)
}

fn image(part: &Value, at: Path) -> Result<Value, TranslateError> {
    let Some(url) = part["image_url"].as_str() else {
        return Err(stored_file(at, "file_id"));
    };
    let mut img = Map::new();
    img.insert("url".into(), url.into());
    if let Some(d) = part["detail"].as_str().filter(|d| *d != "auto") {
        img.insert("detail".into(), d.into());
    }
    Ok(json!({"type": "image_url", "image_url": img}))
}

fn file(part: &Value, at: Path) -> Result<Value, TranslateError> {
    let Some(data) = part["file_data"].as_str() else {
        let key = if part["file_url"].is_string() {
            "file_url"
        } else {
            "file_id"
        };
        return Err(stored_file(at, key));
    };
    let mut file = Map::new();
    file.insert("file_data".into(), data.into());
    if let Some(n) = part["filename"].as_str() {
        file.insert("filename".into(), n.into());
    }
    Ok(json!({"type": "file", "file": file}))
}

fn stored_file(at: Path, key: &str) -> TranslateError {
    TranslateError::unsupported(
        at.key(key),
        "refers to a file the translated upstream cannot fetch; send the data inline \
         (`image_url` as a data: URL, `file_data`)",
    )
}

/// Chat `content`: text-only parts as one string when `join`, else the parts.
fn content(parts: Vec<Value>, join: bool) -> Value {
    let all_text = parts.iter().all(|x| x["type"] == "text");
    if join && all_text {
        let texts: Vec<&str> = parts.iter().filter_map(|x| x["text"].as_str()).collect();
        return texts.join("\n\n").into();
    }
    Value::Array(parts)
}
