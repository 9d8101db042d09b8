//! Reading Anthropic `messages` into neutral turns: text, images (base64 and URL), `tool_use`
//! with ids kept, `tool_result` (text and images, `is_error`); thinking blocks of earlier
//! turns are dropped (README.md says why); other block types are refused with their path.

use serde_json::{Map, Value};

use super::convo::Convo;
use super::error::{Path, Result, TranslateError};
use super::ir::{ChatRequest, Image, Part, Role};
use super::read::{self, refuse};
use super::Format;

/// Block fields that only steer Anthropic's prompt cache or carry citations of earlier answers.
const BLOCK_IGNORED: &[&str] = &["cache_control", "citations"];

pub(super) fn read(v: Value, req: &mut ChatRequest, target: Format) -> Result<()> {
    let root = Path::ROOT;
    let p = root.key("messages");
    let list = read::array(v, p)?;
    let mut convo = Convo::new(target, list.len());
    for (i, m) in list.into_iter().enumerate() {
        let pi = p.idx(i);
        let mut m = read::object(m, pi)?;
        let role = match read::req_str(&mut m, "role", pi)?.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(TranslateError::invalid(
                    pi.key("role"),
                    format!("`{other}` is not user or assistant"),
                ))
            }
        };
        let pc = pi.key("content");
        match m.remove("content") {
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
        read::no_more(&m, pi, target, &[])?;
    }
    req.messages = convo.messages;
    Ok(())
}

fn block(v: Value, p: Path, role: Role, convo: &mut Convo, target: Format) -> Result<()> {
    let mut m = read::object(v, p)?;
    let ty = read::req_str(&mut m, "type", p)?;
    match (ty.as_str(), role) {
        ("text", _) => {
            let text = read::req_str(&mut m, "text", p)?;
            convo.open(role).push(Part::Text(text));
        }
        ("image", Role::User) => {
            let img = image(&mut m, p, target)?;
            convo.open(role).push(Part::Image(img));
        }
        ("tool_use", Role::Assistant) => {
            let id = read::req_str(&mut m, "id", p)?;
            let name = read::req_str(&mut m, "name", p)?;
            let args = match m.remove("input") {
                Some(v @ Value::Object(_)) => v,
                _ => {
                    return Err(TranslateError::invalid(
                        p.key("input"),
                        "must be a JSON object",
                    ))
                }
            };
            convo.tool_call(id, name, args);
        }
        ("tool_result", Role::User) => return tool_result(m, p, convo, target),
        // Earlier turns' reasoning: Anthropic's signature means nothing elsewhere (README.md).
        ("thinking" | "redacted_thinking", Role::Assistant) => return Ok(()),
        (other, _) => {
            return Err(refuse(
                p.key("type"),
                target,
                &format!("a `{other}` block in a {} turn", role_name(role)),
            ))
        }
    }
    read::no_more(&m, p, target, BLOCK_IGNORED)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// `image.source`: `{type: base64, media_type, data}` or `{type: url, url}`.
fn image(m: &mut Map<String, Value>, p: Path, target: Format) -> Result<Image> {
    let ps = p.key("source");
    let mut s = read::object(m.remove("source").unwrap_or(Value::Null), ps)?;
    let ty = read::req_str(&mut s, "type", ps)?;
    let img = match ty.as_str() {
        "base64" => Image::Base64 {
            media_type: read::req_str(&mut s, "media_type", ps)?,
            data: read::req_str(&mut s, "data", ps)?,
        },
        "url" => Image::Url(read::req_str(&mut s, "url", ps)?),
        other => {
            return Err(refuse(
                ps.key("type"),
                target,
                &format!("an image source of type `{other}`"),
            ))
        }
    };
    read::no_more(&s, ps, target, &[])?;
    read::check_image(&img, ps, target)?;
    Ok(img)
}

fn tool_result(
    mut m: Map<String, Value>,
    p: Path,
    convo: &mut Convo,
    target: Format,
) -> Result<()> {
    let id = read::req_str(&mut m, "tool_use_id", p)?;
    let is_error = match m.remove("is_error").filter(|e| !e.is_null()) {
        Some(e) => read::boolean(&e, p.key("is_error"))?,
        None => false,
    };
    let pc = p.key("content");
    let content = match m.remove("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![Part::Text(s)],
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (j, b) in blocks.into_iter().enumerate() {
                parts.push(result_block(b, pc.idx(j), target)?);
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
    read::no_more(&m, p, target, BLOCK_IGNORED)?;
    convo.tool_result(id, content, is_error, p.key("tool_use_id"))
}

fn result_block(v: Value, p: Path, target: Format) -> Result<Part> {
    let mut m = read::object(v, p)?;
    let ty = read::req_str(&mut m, "type", p)?;
    let part = match ty.as_str() {
        "text" => Part::Text(read::req_str(&mut m, "text", p)?),
        "image" => Part::Image(image(&mut m, p, target)?),
        other => {
            return Err(refuse(
                p.key("type"),
                target,
                &format!("a `{other}` block in a tool result"),
            ))
        }
    };
    read::check_tool_result_part(&part, p, target)?;
    read::no_more(&m, p, target, BLOCK_IGNORED)?;
    Ok(part)
}
