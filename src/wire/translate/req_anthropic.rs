//! Reading an Anthropic Messages request into the neutral form: every top-level field is
//! mapped, ignored (listed in `IGNORED`) or refused with its path. Messages:
//! `req_anthropic_msgs`.

use serde_json::Value;

use super::error::{Path, Result, TranslateError};
use super::ir::{ChatRequest, ResponseFormat, Tool, ToolChoice};
use super::read::{self, refuse};
use super::Format;

/// Fields dropped on purpose (README.md says why).
const IGNORED: &[&str] = &["model", "service_tier"];

pub(super) fn read(v: Value, target: Format) -> Result<ChatRequest> {
    let map = read::object(v, Path::ROOT)?;
    let mut req = ChatRequest::default();
    let mut messages = None;
    for (k, v) in map {
        if v.is_null() || IGNORED.contains(&k.as_str()) {
            continue;
        }
        let root = Path::ROOT;
        let p = root.key(&k);
        match k.as_str() {
            "messages" => messages = Some(v),
            "system" => req.system = system(v, p, target)?,
            "max_tokens" => req.max_tokens = Some(read::count(&v, p)?),
            "stream" => req.stream = read::boolean(&v, p)?,
            "temperature" => req.temperature = Some(read::number(&v, p)?),
            "top_p" => req.top_p = Some(read::number(&v, p)?),
            "top_k" if target == Format::Gemini => req.top_k = Some(read::count(&v, p)?),
            "top_k" => return Err(refuse(p, target, "`top_k`")),
            "stop_sequences" => req.stop = stop_sequences(v, p, target)?,
            "metadata" => req.user = metadata(v, p, target)?,
            "tools" => req.tools = tools(v, p, target)?,
            "tool_choice" => tool_choice(v, p, &mut req, target)?,
            "thinking" => req.thinking_budget = thinking(v, p, target)?,
            "output_config" => req.response_format = output_config(v, p, target)?,
            "output_format" => req.response_format = Some(output_format(v, p, target)?),
            _ => return Err(read::unknown(p, target)),
        }
    }
    // An OpenAI upstream reports usage in a stream only when asked; the Anthropic client
    // always gets it (message_start / message_delta).
    req.include_usage = req.stream;
    let messages = messages.ok_or_else(|| TranslateError::invalid("messages", "is required"))?;
    super::req_anthropic_msgs::read(messages, &mut req, target)?;
    Ok(req)
}

/// `system`: a string or text blocks (`cache_control` and `citations` ignored).
fn system(v: Value, p: Path, target: Format) -> Result<Vec<String>> {
    match v {
        Value::String(s) => Ok(vec![s]),
        Value::Array(blocks) => blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                let pi = p.idx(i);
                let mut m = read::object(b, pi)?;
                let ty = read::req_str(&mut m, "type", pi)?;
                if ty != "text" {
                    return Err(refuse(
                        pi.key("type"),
                        target,
                        "a system block that is not text",
                    ));
                }
                let text = read::req_str(&mut m, "text", pi)?;
                read::no_more(&m, pi, target, &["cache_control", "citations"])?;
                Ok(text)
            })
            .collect(),
        other => Err(TranslateError::invalid(
            p,
            format!(
                "must be a string or an array of text blocks, not {}",
                read::kind(&other)
            ),
        )),
    }
}

fn stop_sequences(v: Value, p: Path, target: Format) -> Result<Vec<String>> {
    let list = read::array(v, p)?;
    let max = match target {
        Format::OpenAi => 4,
        _ => 5,
    };
    if list.len() > max {
        return Err(TranslateError::unsupported(
            p,
            format!(
                "has {} sequences; {} accepts at most {max}",
                list.len(),
                target.name()
            ),
        ));
    }
    list.into_iter()
        .enumerate()
        .map(|(i, s)| read::string(s, p.idx(i)))
        .collect()
}

/// `metadata.user_id` (OpenAI `user`; Gemini has no such field: ignored, README.md).
fn metadata(v: Value, p: Path, target: Format) -> Result<Option<String>> {
    let mut m = read::object(v, p)?;
    let user = read::opt_str(&mut m, "user_id", p)?;
    read::no_more(&m, p, target, &[])?;
    Ok(user.filter(|_| target != Format::Gemini))
}

fn tools(v: Value, p: Path, target: Format) -> Result<Vec<Tool>> {
    let list = read::array(v, p)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.into_iter().enumerate() {
        let pi = p.idx(i);
        let mut m = read::object(t, pi)?;
        if let Some(ty) = read::opt_str(&mut m, "type", pi)? {
            if ty != "custom" {
                return Err(refuse(
                    pi.key("type"),
                    target,
                    &format!("Anthropic's server tool `{ty}`"),
                ));
            }
        }
        let name = read::req_str(&mut m, "name", pi)?;
        let description = read::opt_str(&mut m, "description", pi)?;
        let schema = m.remove("input_schema").filter(|s| !s.is_null());
        if schema.is_none() {
            return Err(TranslateError::invalid(
                pi.key("input_schema"),
                "is required",
            ));
        }
        read::no_more(&m, pi, target, &["cache_control"])?;
        out.push(Tool {
            name,
            description,
            schema,
        });
    }
    Ok(out)
}

fn tool_choice(v: Value, p: Path, req: &mut ChatRequest, target: Format) -> Result<()> {
    let mut m = read::object(v, p)?;
    let ty = read::req_str(&mut m, "type", p)?;
    req.tool_choice = Some(match ty.as_str() {
        "auto" => ToolChoice::Auto,
        "any" => ToolChoice::Required,
        "none" => ToolChoice::None,
        "tool" => ToolChoice::Named(read::req_str(&mut m, "name", p)?),
        other => {
            return Err(TranslateError::invalid(
                p.key("type"),
                format!("`{other}` is not auto, any, tool or none"),
            ))
        }
    });
    if let Some(d) = m
        .remove("disable_parallel_tool_use")
        .filter(|d| !d.is_null())
    {
        let pd = p.key("disable_parallel_tool_use");
        let disable = read::boolean(&d, pd)?;
        if disable && target == Format::Gemini {
            return Err(refuse(pd, target, "`disable_parallel_tool_use: true`"));
        }
        req.parallel_tool_calls = Some(!disable);
    }
    read::no_more(&m, p, target, &[])
}

/// `thinking`: Gemini gets a thinking budget; OpenAI-format upstreams have no budget field
/// and decide by model (README.md: ignored).
fn thinking(v: Value, p: Path, target: Format) -> Result<Option<u64>> {
    let mut m = read::object(v, p)?;
    let ty = read::req_str(&mut m, "type", p)?;
    let budget = match m.remove("budget_tokens").filter(|b| !b.is_null()) {
        Some(b) => Some(read::count(&b, p.key("budget_tokens"))?),
        None => None,
    };
    read::no_more(&m, p, target, &[])?;
    match ty.as_str() {
        "enabled" if target == Format::Gemini => Ok(budget),
        "enabled" | "disabled" => Ok(None),
        other => Err(TranslateError::unsupported(
            p.key("type"),
            format!("`{other}` is not enabled or disabled"),
        )),
    }
}

/// `output_config`: `format` is structured output; `effort` tunes Claude's token spend and
/// has no counterpart (README.md: ignored).
fn output_config(v: Value, p: Path, target: Format) -> Result<Option<ResponseFormat>> {
    let mut m = read::object(v, p)?;
    let format = match m.remove("format").filter(|f| !f.is_null()) {
        Some(f) => Some(output_format(f, p.key("format"), target)?),
        None => None,
    };
    read::no_more(&m, p, target, &["effort"])?;
    Ok(format)
}

/// `output_config.format` (and the beta `output_format`): `{type: json_schema, schema}`.
fn output_format(v: Value, p: Path, target: Format) -> Result<ResponseFormat> {
    let mut m = read::object(v, p)?;
    let ty = read::req_str(&mut m, "type", p)?;
    if ty != "json_schema" {
        return Err(TranslateError::unsupported(
            p.key("type"),
            format!("`{ty}` is not json_schema"),
        ));
    }
    let schema = m
        .remove("schema")
        .filter(|s| !s.is_null())
        .ok_or_else(|| TranslateError::invalid(p.key("schema"), "is required"))?;
    read::no_more(&m, p, target, &[])?;
    Ok(ResponseFormat::JsonSchema {
        name: "output".to_string(),
        schema,
        strict: Some(true),
    })
}
