//! Reading Anthropic `messages` into neutral turns: text, images (base64 and URL), `tool_use`
//! with ids kept, `tool_result` (text and images, `is_error`), `role: system` messages at
//! their place, thinking of earlier turns (kept for an OpenAI target, which may want it back:
//! `ReasoningHistory`); cache marks and citations are dropped and reported; other block types
//! are refused with their path.

use serde_json::{Map, Value};

use crate::wire::translate::ir::{ChatRequest, Image, Part, Role};
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::request::convo::Convo;
use crate::wire::translate::request::read::{self, refuse};
use crate::wire::translate::WireFormat;

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
        let role = match read::req_str(&mut message, "role", pi)?.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            // Claude Code's mid-conversation system messages (text only).
            "system" => Role::System,
            other => {
                return Err(TranslateError::invalid(
                    pi.key("role"),
                    format!("`{other}` is not user, assistant or system"),
                ))
            }
        };
        let pc = pi.key("content");
        match message.remove("content") {
            Some(Value::String(s)) => convo.open(role).push(Part::Text(s)),
            Some(Value::Array(blocks)) => {
                convo.open(role);
                for (j, b) in blocks.into_iter().enumerate() {
                    block(b, pc.idx(j), role, &mut convo, target)?;
                }
            }
            Some(other) => {
                return Err(TranslateError::invalid(
                    pc,
                    format!(
                        "must be a string or an array of blocks, not {}",
                        read::kind(&other)
                    ),
                ))
            }
            None => return Err(TranslateError::invalid(pc, "is required")),
        }
        read::no_more(&message, pi, target, &[])?;
    }
    convo.finish(req);
    Ok(())
}

fn block(value: Value, at: Path, role: Role, convo: &mut Convo, target: WireFormat) -> Result<()> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    match (ty.as_str(), role) {
        ("text", _) => {
            let text = read::req_str(&mut fields, "text", at)?;
            convo.open(role).push(Part::Text(text));
        }
        ("image", Role::User) => {
            let img = image(&mut fields, at, target)?;
            convo.open(role).push(Part::Image(img));
        }
        ("tool_use", Role::Assistant) => {
            let id = read::req_str(&mut fields, "id", at)?;
            let name = read::req_str(&mut fields, "name", at)?;
            let args = match fields.remove("input") {
                Some(value @ Value::Object(_)) => value,
                _ => {
                    return Err(TranslateError::invalid(
                        at.key("input"),
                        "must be a JSON object",
                    ))
                }
            };
            caller(fields.remove("caller"), at, target)?;
            convo.tool_call(id, name, args);
        }
        ("tool_result", Role::User) => return tool_result(fields, at, convo, target),
        // Earlier turns' reasoning: the text may go back to an OpenAI-format upstream; the
        // signature means nothing elsewhere (README.md).
        ("thinking", Role::Assistant) => {
            match read::opt_str(&mut fields, "thinking", at)? {
                Some(t) if target == WireFormat::OpenAi && !t.is_empty() => {
                    convo.open(role).push(Part::Thinking(t))
                }
                _ => convo.dropped("thinking"),
            }
            return Ok(());
        }
        ("redacted_thinking", Role::Assistant) => {
            convo.dropped("thinking");
            return Ok(());
        }
        (other, _) => {
            return Err(refuse(
                at.key("type"),
                target,
                &format!("a `{other}` block in a {} turn", role_name(role)),
            ))
        }
    }
    read::drop_keys(&mut fields, read::BLOCK_DROPPED, &mut convo.dropped);
    read::no_more(&fields, at, target, &[])
}

/// A `tool_use` block's `caller`: the SDKs echo it back (`null`, or `{"type": "direct"}`:
/// the model called the tool itself, the only kind the other formats have). A call made
/// from code execution (programmatic tool calling) cannot be expressed.
fn caller(value: Option<Value>, at: Path, target: WireFormat) -> Result<()> {
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(c)) if c.get("type").and_then(Value::as_str) == Some("direct") => Ok(()),
        Some(_) => Err(refuse(
            at.key("caller"),
            target,
            "a tool call made from code execution",
        )),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
    }
}

/// `image.source`: `{type: base64, media_type, data}` or `{type: url, url}`.
fn image(fields: &mut Map<String, Value>, at: Path, target: WireFormat) -> Result<Image> {
    let ps = at.key("source");
    let mut source = read::object(fields.remove("source").unwrap_or(Value::Null), ps)?;
    let ty = read::req_str(&mut source, "type", ps)?;
    let img = match ty.as_str() {
        "base64" => Image::Base64 {
            media_type: read::req_str(&mut source, "media_type", ps)?,
            data: read::req_str(&mut source, "data", ps)?,
        },
        "url" => Image::Url(read::req_str(&mut source, "url", ps)?),
        other => {
            return Err(refuse(
                ps.key("type"),
                target,
                &format!("an image source of type `{other}`"),
            ))
        }
    };
    read::no_more(&source, ps, target, &[])?;
    read::check_image(&img, ps, target)?;
    Ok(img)
}

fn tool_result(
    mut fields: Map<String, Value>,
    at: Path,
    convo: &mut Convo,
    target: WireFormat,
) -> Result<()> {
    let id = read::req_str(&mut fields, "tool_use_id", at)?;
    let is_error = match fields.remove("is_error").filter(|e| !e.is_null()) {
        Some(e) => read::boolean(&e, at.key("is_error"))?,
        None => false,
    };
    let pc = at.key("content");
    let content = match fields.remove("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![Part::Text(s)],
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.into_iter().enumerate() {
                parts.push(result_block(b, pc.idx(j), target, &mut convo.dropped)?);
            }
            parts
        }
        Some(other) => {
            return Err(TranslateError::invalid(
                pc,
                format!(
                    "must be a string or an array of blocks, not {}",
                    read::kind(&other)
                ),
            ))
        }
    };
    if is_error && target == WireFormat::OpenAi {
        // OpenAI `tool` messages have no error flag; the result text says what failed.
        convo.dropped("tool_result.is_error");
    }
    read::drop_keys(&mut fields, read::BLOCK_DROPPED, &mut convo.dropped);
    read::no_more(&fields, at, target, &[])?;
    convo.tool_result(id, content, is_error, at.key("tool_use_id"))
}

fn result_block(
    value: Value,
    at: Path,
    target: WireFormat,
    dropped: &mut Vec<&'static str>,
) -> Result<Part> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    let part = match ty.as_str() {
        "text" => Part::Text(read::req_str(&mut fields, "text", at)?),
        "image" => Part::Image(image(&mut fields, at, target)?),
        other => {
            return Err(refuse(
                at.key("type"),
                target,
                &format!("a `{other}` block in a tool result"),
            ))
        }
    };
    read::drop_keys(&mut fields, read::BLOCK_DROPPED, dropped);
    read::no_more(&fields, at, target, &[])?;
    Ok(part)
}

#[cfg(test)]
mod caller_tests {
    use serde_json::json;

    use crate::wire::translate::{translate_request, RequestOptions, WireFormat};

    /// The SDKs echo `caller` back on `tool_use` blocks (`msg.content` passed as is).
    #[test]
    fn direct_callers_pass_and_code_execution_is_refused() {
        let body = |caller: serde_json::Value| {
            json!({"model": "m", "max_tokens": 5, "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                    "name": "f", "input": {}, "caller": caller}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": "r"}]}]})
            .to_string()
        };
        let go = |b: String| {
            translate_request(
                WireFormat::Anthropic,
                WireFormat::OpenAi,
                b.as_bytes(),
                &RequestOptions::new("m"),
            )
        };
        for ok in [json!(null), json!({"type": "direct"})] {
            let out = go(body(ok.clone())).unwrap_or_else(|e| panic!("{ok}: {e}"));
            let request: serde_json::Value = serde_json::from_slice(&out.body).unwrap();
            assert_eq!(request["messages"][1]["tool_calls"][0]["id"], "toolu_1");
        }
        let error = go(body(
            json!({"type": "code_execution_20250825", "tool_id": "x"}),
        ))
        .unwrap_err();
        assert_eq!(error.field, "messages[1].content[0].caller");
    }
}
