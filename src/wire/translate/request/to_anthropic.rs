//! Writing the neutral request as an Anthropic Messages body: `system` at the top (system
//! messages of the conversation merged into it in order), `max_tokens` always present (the
//! default when the client gave none), tool calls as `tool_use` and tool results as
//! `tool_result` blocks with their ids, cache marks as `cache_control` on the block before.

use serde_json::{json, Map, Value};

use crate::wire::translate::ir::{
    ChatRequest, Image, Message, Part, ResponseFormat, Role, ToolChoice,
};
use crate::wire::translate::request::to_openai::put;
use crate::wire::translate::RequestOptions;

pub(in crate::wire::translate) fn write(mut req: ChatRequest, opts: &RequestOptions) -> Value {
    let mut out = Map::new();
    out.insert("model".into(), opts.model.into());
    out.insert(
        "max_tokens".into(),
        req.max_tokens.unwrap_or(opts.default_max_tokens).into(),
    );
    let hoisted = req.hoist_system();
    let mut sys: Vec<Part> = std::mem::take(&mut req.system)
        .into_iter()
        .map(Part::Text)
        .collect();
    sys.extend(hoisted);
    if sys.iter().any(|p| matches!(p, Part::Text(_))) {
        out.insert("system".into(), content(sys));
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
            let mut tool = Map::new();
            tool.insert("name".into(), t.name.into());
            put(&mut tool, "description", t.description.map(Value::from));
            let schema = t
                .schema
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            tool.insert("input_schema".into(), schema);
            Value::Object(tool)
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

/// Blocks for `parts`: a cache mark becomes `cache_control` on the block before it.
fn blocks(parts: Vec<Part>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(parts.len());
    for p in parts {
        match p {
            Part::CacheControl(c) => {
                if let Some(Value::Object(b)) = out.last_mut() {
                    b.insert("cache_control".into(), c);
                }
            }
            // Unsigned reasoning cannot go to Anthropic (readers never keep it for it).
            Part::Thinking(_) => {}
            other => out.push(block(other)),
        }
    }
    out
}

/// `parts` as Anthropic content (or `system`): one plain text as a string, else blocks.
fn content(parts: Vec<Part>) -> Value {
    match <[Part; 1]>::try_from(parts) {
        Ok([Part::Text(t)]) => Value::from(t),
        Ok(one) => Value::Array(blocks(one.into())),
        Err(parts) => Value::Array(blocks(parts)),
    }
}

/// `tool_choice` carries Anthropic's parallel switch; without tools only `none`/`auto` can be
/// meant, and leaving it out says the same.
fn tool_choice(c: Option<ToolChoice>, parallel: Option<bool>, has_tools: bool) -> Option<Value> {
    if !has_tools {
        return None;
    }
    let mut choice = match c {
        None if parallel == Some(false) => json!({"type": "auto"}),
        None => return None,
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::Named(name)) => json!({"type": "tool", "name": name}),
    };
    if let Some(p) = parallel {
        if choice["type"] != "none" {
            choice["disable_parallel_tool_use"] = (!p).into();
        }
    }
    Some(choice)
}

fn message(m: Message) -> Value {
    let role = match m.role {
        Role::User | Role::System => "user",
        Role::Assistant => "assistant",
    };
    json!({"role": role, "content": content(m.parts)})
}

fn block(part: Part) -> Value {
    match part {
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
            let content = self::content(content);
            let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": content});
            if is_error {
                block["is_error"] = true.into();
            }
            block
        }
        Part::Thinking(_) | Part::CacheControl(_) => Value::Null,
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
