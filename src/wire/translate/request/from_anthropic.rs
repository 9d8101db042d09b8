//! Reading an Anthropic Messages request into the neutral form: every top-level field is
//! mapped, dropped and reported (`ChatRequest::dropped`) or refused with its path. Thinking
//! and effort: `req_anthropic_think`; messages: `req_anthropic_msgs`.

use serde_json::Value;

use crate::wire::translate::ir::{ChatRequest, ResponseFormat, Tool, ToolChoice};
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::request::anthropic_think::{self as think, Thinking};
use crate::wire::translate::request::read::{self, refuse};
use crate::wire::translate::WireFormat;

/// Top-level fields dropped and reported (README.md says why): they steer Anthropic's own
/// context editing and capacity, not the answer.
const DROPPED: &[(&str, &str)] = &[
    ("context_management", "context_management"),
    ("service_tier", "service_tier"),
];

pub(in crate::wire::translate) fn read(value: Value, target: WireFormat) -> Result<ChatRequest> {
    let mut map = read::object(value, Path::ROOT)?;
    let mut req = ChatRequest::default();
    let mut messages = None;
    let mut thinking = Thinking::default();
    map.remove("model");
    read::drop_keys(&mut map, DROPPED, &mut req.dropped);
    for (k, value) in map {
        if value.is_null() {
            continue;
        }
        let root = Path::ROOT;
        let at = root.key(&k);
        match k.as_str() {
            "messages" => messages = Some(value),
            "system" => req.system = system(value, at, target, &mut req.dropped)?,
            "max_tokens" => req.max_tokens = Some(read::count(&value, at)?),
            "stream" => req.stream = read::boolean(&value, at)?,
            "temperature" => req.temperature = Some(read::number(&value, at)?),
            "top_p" => req.top_p = Some(read::number(&value, at)?),
            "top_k" if target == WireFormat::Gemini => req.top_k = Some(read::count(&value, at)?),
            "top_k" => return Err(refuse(at, target, "`top_k`")),
            "stop_sequences" => req.stop = stop_sequences(value, at, target)?,
            "metadata" => req.user = metadata(value, at, target, &mut req.dropped)?,
            "tools" => req.tools = tools(value, at, target, &mut req.dropped)?,
            "tool_choice" => tool_choice(value, at, &mut req, target)?,
            "thinking" => thinking.mode = Some(think::read(value, at, target)?),
            "output_config" => {
                let (format, effort) = output_config(value, at, target)?;
                req.response_format = format;
                thinking.effort = effort;
            }
            "output_format" => req.response_format = Some(output_format(value, at, target)?),
            _ => return Err(read::unknown(at, target)),
        }
    }
    // An OpenAI upstream reports usage in a stream only when asked; the Anthropic client
    // always gets it (message_start / message_delta).
    req.include_usage = req.stream;
    think::apply(thinking, &mut req, target);
    let messages = messages.ok_or_else(|| TranslateError::invalid("messages", "is required"))?;
    crate::wire::translate::request::from_anthropic_msgs::read(messages, &mut req, target)?;
    Ok(req)
}

/// `system`: a string or text blocks (`cache_control` and `citations` dropped).
fn system(
    value: Value,
    at: Path,
    target: WireFormat,
    dropped: &mut Vec<&'static str>,
) -> Result<Vec<String>> {
    match value {
        Value::String(s) => Ok(vec![s]),
        Value::Array(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                let pi = at.idx(i);
                let mut fields = read::object(b, pi)?;
                let ty = read::req_str(&mut fields, "type", pi)?;
                if ty != "text" {
                    return Err(refuse(
                        pi.key("type"),
                        target,
                        "a system block that is not text",
                    ));
                }
                let text = read::req_str(&mut fields, "text", pi)?;
                read::drop_keys(&mut fields, read::BLOCK_DROPPED, dropped);
                read::no_more(&fields, pi, target, &[])?;
                Ok(text)
            })
            .collect(),
        other => Err(TranslateError::invalid(
            at,
            format!(
                "must be a string or an array of text blocks, not {}",
                read::kind(&other)
            ),
        )),
    }
}

fn stop_sequences(value: Value, at: Path, target: WireFormat) -> Result<Vec<String>> {
    let list = read::array(value, at)?;
    let max = match target {
        WireFormat::OpenAi => 4,
        _ => 5,
    };
    if list.len() > max {
        return Err(TranslateError::unsupported(
            at,
            format!(
                "has {} sequences; {} accepts at most {max}",
                list.len(),
                target.name()
            ),
        ));
    }
    list.into_iter()
        .enumerate()
        .map(|(i, s)| read::string(s, at.idx(i)))
        .collect()
}

/// `metadata.user_id` (OpenAI `user`, hashed when longer than OpenAI's 64 characters; Gemini
/// has no such field). Other metadata keys are dropped and reported.
fn metadata(
    value: Value,
    at: Path,
    target: WireFormat,
    dropped: &mut Vec<&'static str>,
) -> Result<Option<String>> {
    let mut metadata = read::object(value, at)?;
    let user = read::opt_str(&mut metadata, "user_id", at)?;
    if metadata.values().any(|value| !value.is_null()) {
        crate::wire::translate::ir::note(dropped, "metadata");
    }
    let user = match (user, target) {
        (Some(_), WireFormat::Gemini) => {
            crate::wire::translate::ir::note(dropped, "metadata.user_id");
            None
        }
        (Some(u), WireFormat::OpenAi) => Some(openai_user(u)),
        (u, _) => u,
    };
    Ok(user)
}

/// OpenAI's `user` is at most 64 characters. A longer id (Claude Code sends a JSON document)
/// becomes `u_` and the first 62 hex digits of its SHA-256: stable, so per-user tracking and
/// caching upstream still see one user.
pub(in crate::wire::translate) fn openai_user(id: String) -> String {
    use sha2::{Digest, Sha256};
    const MAX: usize = 64;
    if id.len() <= MAX {
        return id;
    }
    let mut hashed = hex::encode(Sha256::digest(id.as_bytes()));
    hashed.truncate(MAX - 2);
    format!("u_{hashed}")
}

fn tools(
    value: Value,
    at: Path,
    target: WireFormat,
    dropped: &mut Vec<&'static str>,
) -> Result<Vec<Tool>> {
    let list = read::array(value, at)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.into_iter().enumerate() {
        let pi = at.idx(i);
        let mut tool = read::object(t, pi)?;
        if let Some(ty) = read::opt_str(&mut tool, "type", pi)? {
            if ty != "custom" {
                return Err(refuse(
                    pi.key("type"),
                    target,
                    &format!("Anthropic's server tool `{ty}`"),
                ));
            }
        }
        let name = read::req_str(&mut tool, "name", pi)?;
        let description = read::opt_str(&mut tool, "description", pi)?;
        let schema = tool.remove("input_schema").filter(|s| !s.is_null());
        if schema.is_none() {
            return Err(TranslateError::invalid(
                pi.key("input_schema"),
                "is required",
            ));
        }
        read::drop_keys(&mut tool, read::BLOCK_DROPPED, dropped);
        read::no_more(&tool, pi, target, &[])?;
        out.push(Tool {
            name,
            description,
            schema,
        });
    }
    Ok(out)
}

fn tool_choice(value: Value, at: Path, req: &mut ChatRequest, target: WireFormat) -> Result<()> {
    let mut choice = read::object(value, at)?;
    let ty = read::req_str(&mut choice, "type", at)?;
    req.tool_choice = Some(match ty.as_str() {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "none" => ToolChoice::None,
        "tool" => ToolChoice::Named(read::req_str(&mut choice, "name", at)?),
        other => {
            return Err(TranslateError::invalid(
                at.key("type"),
                format!("`{other}` is not auto, any, tool or none"),
            ))
        }
    });
    if let Some(d) = choice
        .remove("disable_parallel_tool_use")
        .filter(|d| !d.is_null())
    {
        let pd = at.key("disable_parallel_tool_use");
        let disable = read::boolean(&d, pd)?;
        if disable && target == WireFormat::Gemini {
            return Err(refuse(pd, target, "`disable_parallel_tool_use: true`"));
        }
        req.parallel_tool_calls = Some(!disable);
    }
    read::no_more(&choice, at, target, &[])
}

/// `output_config`: `format` is structured output; `effort` tunes Claude's token spend (the
/// reasoning effort where the target has one: `req_anthropic_think`).
fn output_config(
    value: Value,
    at: Path,
    target: WireFormat,
) -> Result<(Option<ResponseFormat>, Option<String>)> {
    let mut config = read::object(value, at)?;
    let format = match config.remove("format").filter(|f| !f.is_null()) {
        Some(f) => Some(output_format(f, at.key("format"), target)?),
        None => None,
    };
    let effort = read::opt_str(&mut config, "effort", at)?;
    read::no_more(&config, at, target, &[])?;
    Ok((format, effort))
}

/// `output_config.format` (and the beta `output_format`): `{type: json_schema, schema}`.
fn output_format(value: Value, at: Path, target: WireFormat) -> Result<ResponseFormat> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    if ty != "json_schema" {
        return Err(TranslateError::unsupported(
            at.key("type"),
            format!("`{ty}` is not json_schema"),
        ));
    }
    let schema = fields
        .remove("schema")
        .filter(|s| !s.is_null())
        .ok_or_else(|| TranslateError::invalid(at.key("schema"), "is required"))?;
    read::no_more(&fields, at, target, &[])?;
    Ok(ResponseFormat::JsonSchema {
        name: "output".to_string(),
        schema,
        strict: Some(true),
    })
}
