//! Reading OpenAI `messages` into neutral turns: system/developer messages stay at their place
//! (the Anthropic and Gemini writers merge them into the system prompt in order), `tool`
//! messages become tool results of the following user turn, assistant `tool_calls` become
//! tool calls with their ids kept, and OpenRouter-style `cache_control` (on a message or on a
//! content part) becomes a cache mark for Anthropic.

use serde_json::{Map, Value};

use crate::wire::translate::ir::{ChatRequest, Part, Role};
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::request::convo::Convo;
use crate::wire::translate::request::read::{self, refuse};
use crate::wire::translate::WireFormat;

/// Assistant fields that carry earlier turns' reasoning and citations: neither Anthropic
/// (which requires its own signature, never made up) nor Gemini takes them back as input
/// (README.md); dropped and reported.
const ASSISTANT_DROPPED: &[(&str, &str)] = &[
    ("reasoning_content", "reasoning_content"),
    ("reasoning", "reasoning_content"),
    ("thinking_blocks", "reasoning_content"),
    ("annotations", "annotations"),
];

pub(in crate::wire::translate) fn read(
    value: Value,
    req: &mut ChatRequest,
    target: WireFormat,
) -> Result<()> {
    let root = Path::ROOT;
    let at = root.key("messages");
    let list = read::array(value, at)?;
    let mut convo = Convo::new(target, list.len());
    for (i, message) in list.into_iter().enumerate() {
        let pi = at.idx(i);
        let mut message = read::object(message, pi)?;
        let role = read::req_str(&mut message, "role", pi)?;
        if message.remove("name").is_some_and(|n| !n.is_null()) {
            return Err(refuse(pi.key("name"), target, "a participant name"));
        }
        let cache = cache_mark(&mut message, &mut convo, target);
        match role.as_str() {
            "system" | "developer" => {
                let parts = text_parts(message.remove("content"), pi.key("content"), &mut convo)?;
                read::no_more(&message, pi, target, &[])?;
                convo.open(Role::System).extend(parts);
            }
            "user" => user(message, pi, &mut convo, target)?,
            "assistant" => assistant(message, pi, &mut convo, target)?,
            "tool" => tool(message, pi, &mut convo, target)?,
            "function" => {
                return Err(TranslateError::unsupported(
                    pi.key("role"),
                    "`function` is the deprecated function-calling API; send `tool` messages",
                ))
            }
            other => {
                return Err(TranslateError::invalid(
                    pi.key("role"),
                    format!("`{other}` is not system, developer, user, assistant or tool"),
                ))
            }
        }
        if let Some(c) = cache {
            mark_last(&mut convo, c);
        }
    }
    convo.finish(req);
    Ok(())
}

/// A `cache_control` field of `m`: kept for Anthropic, dropped and reported for the others.
fn cache_mark(
    fields: &mut Map<String, Value>,
    convo: &mut Convo,
    target: WireFormat,
) -> Option<Value> {
    let cache_control = fields
        .remove("cache_control")
        .filter(|cache_control| !cache_control.is_null())?;
    if target == WireFormat::Anthropic {
        Some(cache_control)
    } else {
        convo.dropped("cache_control");
        None
    }
}

/// A message-level cache mark applies to the message's last block (a tool message's: its
/// tool result).
fn mark_last(convo: &mut Convo, value: Value) {
    if let Some(last) = convo.messages.last_mut() {
        last.parts.push(Part::CacheControl(value));
    }
}

/// A string, or an array of `{type: text, text}` parts (system and tool messages); a part's
/// `cache_control` follows it as a cache mark (Anthropic) or is dropped.
fn text_parts(value: Option<Value>, at: Path, convo: &mut Convo) -> Result<Vec<Part>> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![Part::Text(s)]),
        Some(Value::Array(list)) => {
            let mut parts = Vec::with_capacity(list.len());
            for (i, part) in list.into_iter().enumerate() {
                let pi = at.idx(i);
                let mut fields = read::object(part, pi)?;
                let ty = read::req_str(&mut fields, "type", pi)?;
                if ty != "text" {
                    return Err(TranslateError::unsupported(
                        pi.key("type"),
                        format!("`{ty}` here; only text parts are allowed"),
                    ));
                }
                parts.push(Part::Text(read::req_str(&mut fields, "text", pi)?));
                let target = convo.target();
                parts.extend(cache_mark(&mut fields, convo, target).map(Part::CacheControl));
            }
            Ok(parts)
        }
        Some(other) => Err(TranslateError::invalid(
            at,
            format!(
                "must be a string or an array of parts, not {}",
                read::kind(&other)
            ),
        )),
    }
}

fn user(
    mut fields: Map<String, Value>,
    at: Path,
    convo: &mut Convo,
    target: WireFormat,
) -> Result<()> {
    let pc = at.key("content");
    let parts = match fields.remove("content") {
        Some(Value::String(s)) => vec![Part::Text(s)],
        Some(Value::Array(list)) => {
            let mut parts = Vec::with_capacity(list.len());
            for (i, part) in list.into_iter().enumerate() {
                user_part(part, pc.idx(i), target, convo, &mut parts)?;
            }
            parts
        }
        Some(other) => {
            return Err(TranslateError::invalid(
                pc,
                format!(
                    "must be a string or an array of parts, not {}",
                    read::kind(&other)
                ),
            ))
        }
        None => return Err(TranslateError::invalid(pc, "is required")),
    };
    read::no_more(&fields, at, target, &[])?;
    convo.open(Role::User).extend(parts);
    Ok(())
}

fn user_part(
    value: Value,
    at: Path,
    target: WireFormat,
    convo: &mut Convo,
    out: &mut Vec<Part>,
) -> Result<()> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    let part = match ty.as_str() {
        "text" => Part::Text(read::req_str(&mut fields, "text", at)?),
        "image_url" => {
            let pu = at.key("image_url");
            let mut image_url =
                read::object(fields.remove("image_url").unwrap_or(Value::Null), pu)?;
            let url = read::req_str(&mut image_url, "url", pu)?;
            // `detail` picks OpenAI's image resolution; the others choose their own (README.md).
            read::drop_keys(
                &mut image_url,
                &[("detail", "image_url.detail")],
                &mut convo.dropped,
            );
            read::no_more(&image_url, pu, target, &[])?;
            let img = read::image_from_url(url, pu.key("url"))?;
            read::check_image(&img, pu.key("url"), target)?;
            Part::Image(img)
        }
        "input_audio" => return Err(refuse(at, target, "audio input")),
        "file" => return Err(refuse(at, target, "a file part")),
        other => {
            return Err(TranslateError::unsupported(
                at.key("type"),
                format!("`{other}` is not a content part the translation knows"),
            ))
        }
    };
    let cache = cache_mark(&mut fields, convo, target);
    read::no_more(&fields, at, target, &[])?;
    out.push(part);
    out.extend(cache.map(Part::CacheControl));
    Ok(())
}

fn assistant(
    mut fields: Map<String, Value>,
    at: Path,
    convo: &mut Convo,
    target: WireFormat,
) -> Result<()> {
    let mut parts = Vec::new();
    let mut calls_out = Vec::new();
    let pc = at.key("content");
    match fields.remove("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => parts.push(Part::Text(s)),
        Some(Value::Array(list)) => {
            for (i, part) in list.into_iter().enumerate() {
                parts.push(assistant_part(part, pc.idx(i))?);
            }
        }
        Some(other) => {
            return Err(TranslateError::invalid(
                pc,
                format!(
                    "must be a string, an array of parts or null, not {}",
                    read::kind(&other)
                ),
            ))
        }
    }
    if let Some(r) = read::opt_str(&mut fields, "refusal", at)? {
        parts.push(Part::Text(r));
    }
    // Nothing to say in an empty text next to tool calls; Anthropic refuses empty text blocks.
    parts.retain(|part| !matches!(part, Part::Text(t) if t.is_empty()));
    if let Some(calls) = fields.remove("tool_calls").filter(|c| !c.is_null()) {
        let pt = at.key("tool_calls");
        for (i, mut call) in read::array(calls, pt)?.into_iter().enumerate() {
            // OpenCode marks the last tool call for caching: the mark follows its block.
            let cache = match call.as_object_mut() {
                Some(c) => cache_mark(c, convo, target),
                None => None,
            };
            calls_out.push((tool_call(call, pt.idx(i), target)?, cache));
        }
    }
    if fields.contains_key("audio") {
        return Err(refuse(at.key("audio"), target, "assistant audio"));
    }
    if fields.contains_key("function_call") {
        return Err(TranslateError::unsupported(
            at.key("function_call"),
            "is the deprecated function-calling API; send `tool_calls`",
        ));
    }
    read::drop_keys(&mut fields, ASSISTANT_DROPPED, &mut convo.dropped);
    read::no_more(&fields, at, target, &[])?;
    convo.open(Role::Assistant).extend(parts);
    for ((id, name, args), cache) in calls_out {
        convo.tool_call(id, name, args);
        if let Some(c) = cache {
            mark_last(convo, c);
        }
    }
    Ok(())
}

fn assistant_part(value: Value, at: Path) -> Result<Part> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    match ty.as_str() {
        "text" => Ok(Part::Text(read::req_str(&mut fields, "text", at)?)),
        "refusal" => Ok(Part::Text(read::req_str(&mut fields, "refusal", at)?)),
        other => Err(TranslateError::unsupported(
            at.key("type"),
            format!("`{other}` in an assistant message; only text and refusal parts are allowed"),
        )),
    }
}

fn tool_call(value: Value, at: Path, target: WireFormat) -> Result<(String, String, Value)> {
    let mut fields = read::object(value, at)?;
    let id = read::req_str(&mut fields, "id", at)?;
    if read::opt_str(&mut fields, "type", at)?.is_some_and(|t| t != "function") {
        return Err(refuse(
            at.key("type"),
            target,
            "a tool call that is not a function call",
        ));
    }
    let pf = at.key("function");
    let mut function = read::object(fields.remove("function").unwrap_or(Value::Null), pf)?;
    // `index`: clients that rebuild history from streamed deltas keep it; it means nothing here.
    read::no_more(&fields, at, target, &["index"])?;
    let name = read::req_str(&mut function, "name", pf)?;
    let pa = pf.key("arguments");
    let raw = read::opt_str(&mut function, "arguments", pf)?.unwrap_or_default();
    let args = if raw.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        match serde_json::from_str::<Value>(&raw) {
            Ok(value @ Value::Object(_)) => value,
            _ => {
                return Err(TranslateError::unsupported(
                    pa,
                    format!(
                        "is not a JSON object; {} needs tool arguments as an object",
                        target.name()
                    ),
                ))
            }
        }
    };
    read::no_more(&function, pf, target, &[])?;
    Ok((id, name, args))
}

fn tool(
    mut fields: Map<String, Value>,
    at: Path,
    convo: &mut Convo,
    target: WireFormat,
) -> Result<()> {
    let id = read::req_str(&mut fields, "tool_call_id", at)?;
    let content = text_parts(fields.remove("content"), at.key("content"), convo)?;
    read::no_more(&fields, at, target, &[])?;
    convo.tool_result(id, content, false, at.key("tool_call_id"))
}
