//! Writing the neutral request as an OpenAI Chat Completions body: the system prompt first,
//! system messages at their place, each tool result as a `tool` message ahead of the rest of
//! its user turn (images of tool results follow in a user message), assistant text,
//! `tool_calls` with their ids and — where the upstream wants it — `reasoning_content`.

use serde_json::{json, Map, Value};

use crate::wire::translate::ids;
use crate::wire::translate::ir::{
    ChatRequest, Image, Message, Part, ResponseFormat, Role, ToolChoice,
};
use crate::wire::translate::{MaxTokensField, ReasoningHistory, RequestOptions};

/// What a tool message says when its result is only images (they follow in a user message).
pub(in crate::wire::translate) const IMAGE_PLACEHOLDER: &str = "(image attached below)";

/// How the messages are written.
#[derive(Clone, Copy)]
struct Style {
    /// Text-only content as one string (`RequestOptions::join_text_parts`).
    join: bool,
    /// Earlier turns' thinking as `reasoning_content` (`ReasoningHistory`).
    reasoning: bool,
}

pub(in crate::wire::translate) fn write(req: ChatRequest, opts: &RequestOptions) -> Value {
    let mut out = Map::new();
    out.insert("model".into(), opts.model.into());
    let style = Style {
        join: opts.join_text_parts,
        reasoning: opts.reasoning_history.resolve(opts.model) == ReasoningHistory::ReasoningContent,
    };
    out.insert(
        "messages".into(),
        Value::Array(messages(req.system, req.messages, style)),
    );
    if let Some(n) = req.max_tokens {
        let key = match opts.max_tokens_field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        out.insert(key.into(), n.into());
    }
    put(&mut out, "temperature", req.temperature.map(Value::from));
    put(&mut out, "top_p", req.top_p.map(Value::from));
    if !req.stop.is_empty() {
        out.insert("stop".into(), req.stop.into());
    }
    if req.stream {
        out.insert("stream".into(), true.into());
        // Usage is reported in a stream only on request; the translated answer needs it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !req.tools.is_empty() {
        let tools = req.tools.into_iter().map(|t| {
            let mut function = Map::new();
            function.insert("name".into(), t.name.into());
            put(&mut function, "description", t.description.map(Value::from));
            let schema = t
                .schema
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            function.insert("parameters".into(), schema);
            json!({"type": "function", "function": function})
        });
        out.insert("tools".into(), tools.collect());
    }
    put(&mut out, "tool_choice", req.tool_choice.map(tool_choice));
    put(
        &mut out,
        "parallel_tool_calls",
        req.parallel_tool_calls.map(Value::from),
    );
    put(&mut out, "user", req.user.map(Value::from));
    put(
        &mut out,
        "reasoning_effort",
        req.reasoning_effort.map(Value::from),
    );
    if let Some(ResponseFormat::JsonSchema {
        name,
        schema,
        strict,
    }) = req.response_format
    {
        let mut json_schema = json!({"name": name, "schema": schema});
        if let Some(s) = strict {
            json_schema["strict"] = s.into();
        }
        out.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": json_schema}),
        );
    }
    Value::Object(out)
}

pub(in crate::wire::translate) fn put(
    fields: &mut Map<String, Value>,
    k: &str,
    value: Option<Value>,
) {
    if let Some(value) = value {
        fields.insert(k.into(), value);
    }
}

fn tool_choice(choice: ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
    }
}

fn messages(system: Vec<String>, msgs: Vec<Message>, style: Style) -> Vec<Value> {
    let mut out = Vec::with_capacity(msgs.len() + 1);
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": text_content(system, style.join)}));
    }
    // A system message between tool calls and their results waits until after the `tool`
    // messages: OpenAI wants those right after the calls.
    let mut deferred: Vec<Value> = Vec::new();
    let mut calls_open = false;
    for m in msgs {
        match m.role {
            Role::User => {
                let start = out.len();
                user(m.parts, style.join, &mut out);
                let at = (start..out.len())
                    .find(|&i| out[i]["role"] != "tool")
                    .unwrap_or(out.len());
                out.splice(at..at, deferred.drain(..));
                calls_open = false;
            }
            Role::Assistant => {
                out.append(&mut deferred);
                let turn = assistant(m.parts, style);
                calls_open = turn.get("tool_calls").is_some();
                out.push(turn);
            }
            Role::System => {
                let texts = texts_of(m.parts);
                if !texts.is_empty() {
                    let content = text_content(texts, style.join);
                    let message = json!({"role": "system", "content": content});
                    if calls_open {
                        deferred.push(message);
                    } else {
                        out.push(message);
                    }
                }
            }
        }
    }
    out.append(&mut deferred);
    out
}

/// The texts among `parts` (cache marks and anything else left out).
fn texts_of(parts: Vec<Part>) -> Vec<String> {
    parts
        .into_iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t),
            _ => None,
        })
        .collect()
}

/// What separates text blocks joined into one string.
pub(in crate::wire::translate) const TEXT_JOINER: &str = "\n\n";

/// One text is a string; several are one string (`join`) or text parts.
fn text_content(texts: Vec<String>, join: bool) -> Value {
    if texts.len() == 1 || join {
        return Value::from(texts.join(TEXT_JOINER));
    }
    texts
        .into_iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect()
}

/// Tool results go first, as `tool` messages right after the assistant's calls (a `tool`
/// message carries text only: an image of a result follows, in order, at the start of the
/// user message after the turn's tool messages — the pattern OpenAI-compatible servers
/// document); the rest of the turn follows in that user message.
fn user(parts: Vec<Part>, join: bool, out: &mut Vec<Value>) {
    let mut images = Vec::new();
    let mut rest = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult { id, content, .. } => {
                let mut texts = Vec::new();
                for p in content {
                    match p {
                        Part::Text(t) => texts.push(t),
                        img @ Part::Image(_) => images.push(img),
                        _ => {}
                    }
                }
                let content = match (texts.is_empty(), images.is_empty()) {
                    (false, _) => text_content(texts, join),
                    (true, false) => Value::from(IMAGE_PLACEHOLDER),
                    (true, true) => Value::from(""),
                };
                let id = ids::upstream_openai_id(id);
                out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            Part::CacheControl(_) | Part::Thinking(_) => {}
            other => rest.push(other),
        }
    }
    images.append(&mut rest);
    let rest = images;
    if rest.is_empty() {
        return;
    }
    let only_text = rest.iter().all(|p| matches!(p, Part::Text(_)));
    let content = if only_text && (join || rest.len() == 1) {
        let texts = rest.into_iter().filter_map(|p| match p {
            Part::Text(t) => Some(t),
            _ => None,
        });
        Value::from(texts.collect::<Vec<_>>().join(TEXT_JOINER))
    } else {
        rest.into_iter().filter_map(user_part).collect()
    };
    out.push(json!({"role": "user", "content": content}));
}

fn user_part(part: Part) -> Option<Value> {
    match part {
        Part::Text(t) => Some(json!({"type": "text", "text": t})),
        Part::Image(Image::Url(url)) => {
            Some(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        Part::Image(Image::Base64 { media_type, data }) => {
            let url = format!("data:{media_type};base64,{data}");
            Some(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        _ => None,
    }
}

fn assistant(parts: Vec<Part>, style: Style) -> Value {
    let mut texts = Vec::new();
    let mut thinking = Vec::new();
    let mut calls = Vec::new();
    for p in parts {
        match p {
            Part::Text(t) => texts.push(t),
            Part::Thinking(t) => thinking.push(t),
            Part::ToolCall { id, name, args } => calls.push(json!({
                "id": ids::upstream_openai_id(id),
                "type": "function",
                "function": {"name": name, "arguments": args.to_string()},
            })),
            _ => {}
        }
    }
    let mut message = Map::new();
    message.insert("role".into(), "assistant".into());
    // OpenAI requires content when there are no tool calls (a turn that held only thinking).
    let content = match (texts.is_empty(), calls.is_empty()) {
        (false, _) => text_content(texts, style.join),
        (true, false) => Value::Null,
        (true, true) => Value::from(""),
    };
    message.insert("content".into(), content);
    // DeepSeek's thinking mode refuses a tool-call turn without `reasoning_content`, even an
    // empty one (a turn another model wrote).
    if style.reasoning && (!thinking.is_empty() || !calls.is_empty()) {
        message.insert(
            "reasoning_content".into(),
            thinking.join(TEXT_JOINER).into(),
        );
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(message)
}
