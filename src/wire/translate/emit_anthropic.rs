//! Writing the neutral request as an Anthropic Messages body: `system` at the top, `max_tokens`
//! always present (the default when the client gave none), tool calls as `tool_use` and tool
//! results as `tool_result` blocks with their ids.

use serde_json::{json, Map, Value};

use super::emit_openai::put;
use super::ir::{ChatRequest, Image, Message, Part, ResponseFormat, Role, ToolChoice};
use super::RequestOptions;

pub(super) fn write(req: ChatRequest, opts: &RequestOptions) -> Value {
    let mut out = Map::new();
    out.insert("model".into(), opts.model.into());
    out.insert(
        "max_tokens".into(),
        req.max_tokens.unwrap_or(opts.default_max_tokens).into(),
    );
    if !req.system.is_empty() {
        out.insert("system".into(), system(req.system));
    }
    let msgs = req.messages.into_iter().map(message).collect();
    out.insert("messages".into(), Value::Array(msgs));
    put(&mut out, "temperature", req.temperature.map(Value::from));
    put(&mut out, "top_p", req.top_p.map(Value::from));
    put(&mut out, "top_k", req.top_k.map(Value::from));
    if !req.stop.is_empty() {
        out.insert("stop_sequences".into(), req.stop.into());
    }
    if req.stream {
        out.insert("stream".into(), true.into());
    }
    let has_tools = !req.tools.is_empty();
    if has_tools {
        let tools = req.tools.into_iter().map(|t| {
            let mut m = Map::new();
            m.insert("name".into(), t.name.into());
            put(&mut m, "description", t.description.map(Value::from));
            let schema = t
                .schema
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            m.insert("input_schema".into(), schema);
            Value::Object(m)
        });
        out.insert("tools".into(), tools.collect());
    }
    if let Some(c) = tool_choice(req.tool_choice, req.parallel_tool_calls, has_tools) {
        out.insert("tool_choice".into(), c);
    }
    if let Some(user) = req.user {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    if let Some(b) = req.thinking_budget {
        out.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
    }
    if let Some(ResponseFormat::JsonSchema { schema, .. }) = req.response_format {
        let format = json!({"type": "json_schema", "schema": schema});
        out.insert("output_config".into(), json!({ "format": format }));
    }
    Value::Object(out)
}

fn system(texts: Vec<String>) -> Value {
    if texts.len() == 1 {
        return texts
            .into_iter()
            .next()
            .map(Value::from)
            .unwrap_or_default();
    }
    texts
        .into_iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect()
}

/// `tool_choice` carries Anthropic's parallel switch; without tools only `none`/`auto` can be
/// meant, and leaving it out says the same.
fn tool_choice(c: Option<ToolChoice>, parallel: Option<bool>, has_tools: bool) -> Option<Value> {
    if !has_tools {
        return None;
    }
    let mut v = match c {
        None if parallel == Some(false) => json!({"type": "auto"}),
        None => return None,
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::Named(name)) => json!({"type": "tool", "name": name}),
    };
    if let Some(p) = parallel {
        if v["type"] != "none" {
            v["disable_parallel_tool_use"] = (!p).into();
        }
    }
    Some(v)
}

fn message(m: Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content: Value = if let [Part::Text(_)] = m.parts.as_slice() {
        m.parts
            .into_iter()
            .next()
            .and_then(|p| match p {
                Part::Text(t) => Some(Value::from(t)),
                _ => None,
            })
            .unwrap_or_default()
    } else {
        m.parts.into_iter().map(block).collect()
    };
    json!({"role": role, "content": content})
}

fn block(p: Part) -> Value {
    match p {
        Part::Text(t) => json!({"type": "text", "text": t}),
        Part::Image(img) => json!({"type": "image", "source": source(img)}),
        Part::ToolCall { id, name, args } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": args})
        }
        Part::ToolResult {
            id,
            content,
            is_error,
            ..
        } => {
            let content: Value = if let [Part::Text(_)] = content.as_slice() {
                content
                    .into_iter()
                    .next()
                    .and_then(|p| match p {
                        Part::Text(t) => Some(Value::from(t)),
                        _ => None,
                    })
                    .unwrap_or_default()
            } else {
                content.into_iter().map(block).collect()
            };
            let mut b = json!({"type": "tool_result", "tool_use_id": id, "content": content});
            if is_error {
                b["is_error"] = true.into();
            }
            b
        }
    }
}

fn source(img: Image) -> Value {
    match img {
        Image::Url(url) => json!({"type": "url", "url": url}),
        Image::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
    }
}
