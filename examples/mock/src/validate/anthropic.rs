//! What Anthropic's Messages API and its token counting refuse: fields it does not know
//! (`Extra inputs are not permitted`), beta-only fields without their beta, a `system` role
//! inside `messages` without the mid-conversation beta, thinking blocks without a valid
//! signature, `tool_use` without its `tool_result` right after (and the reverse). Runs of
//! the same role are merged, as Anthropic does.
use http::HeaderMap;
use serde_json::{Map, Value};

use super::{unknown_key, Refusal};

pub const MESSAGE_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_k",
    "top_p",
    "thinking",
    "tools",
    "tool_choice",
    "service_tier",
    "container",
    "mcp_servers",
    "output_config",
    "output_format",
    "inference_geo",
    "context_management",
];

const COUNT_FIELDS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "mcp_servers",
    "output_config",
    "output_format",
    "context_management",
];

/// Fields only a beta accepts: (field, beta flag prefix).
pub const BETA_FIELDS: &[(&str, &str)] = &[("context_management", "context-management-")];
/// The beta that allows `role: system` inside `messages`.
const MID_SYSTEM_BETA: &str = "mid-conversation-system-";

/// The fields of each content block type.
fn block_fields(ty: &str) -> Option<&'static [&'static str]> {
    Some(match ty {
        "text" => &["type", "text", "cache_control", "citations"],
        "image" => &["type", "source", "cache_control"],
        "document" => &[
            "type",
            "source",
            "cache_control",
            "citations",
            "context",
            "title",
        ],
        "search_result" => &[
            "type",
            "source",
            "title",
            "content",
            "cache_control",
            "citations",
        ],
        "tool_use" | "server_tool_use" => &["type", "id", "name", "input", "cache_control"],
        "tool_result" => &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
        ],
        "thinking" => &["type", "thinking", "signature"],
        "redacted_thinking" => &["type", "data"],
        _ => return None,
    })
}

struct Betas(Vec<String>);

impl Betas {
    fn of(h: &HeaderMap) -> Betas {
        Betas(
            h.get_all("anthropic-beta")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|f| f.trim().to_string())
                .collect(),
        )
    }

    fn has(&self, prefix: &str) -> bool {
        self.0.iter().any(|f| f.starts_with(prefix))
    }
}

fn extra(path: &str) -> Refusal {
    Refusal::anthropic(&format!("{path}: Extra inputs are not permitted"))
}

/// A Messages request.
pub(crate) fn messages(h: &HeaderMap, b: &Map<String, Value>) -> Result<(), Refusal> {
    let betas = Betas::of(h);
    common(&betas, b, MESSAGE_FIELDS)?;
    let Some(max) = b.get("max_tokens") else {
        return Err(Refusal::anthropic("max_tokens: Field required"));
    };
    if max.as_u64().is_none_or(|m| m < 1) {
        return Err(Refusal::anthropic(
            "max_tokens: Input should be greater than or equal to 1",
        ));
    }
    thinking(b, max.as_u64().unwrap_or(0))?;
    if let Some(Value::Object(meta)) = b.get("metadata") {
        if let Some(k) = unknown_key(meta, &["user_id"]) {
            return Err(extra(&format!("metadata.{k}")));
        }
    }
    Ok(())
}

/// A token-counting request.
pub(crate) fn count_tokens(h: &HeaderMap, b: &Map<String, Value>) -> Result<(), Refusal> {
    common(&Betas::of(h), b, COUNT_FIELDS)
}

/// The fields, system and messages, shared by both endpoints.
fn common(betas: &Betas, b: &Map<String, Value>, known: &[&str]) -> Result<(), Refusal> {
    if let Some(k) = unknown_key(b, known) {
        return Err(extra(k));
    }
    for (field, beta) in BETA_FIELDS {
        if b.contains_key(*field) && !betas.has(beta) {
            return Err(extra(field));
        }
    }
    if !b.get("model").is_some_and(Value::is_string) {
        return Err(Refusal::anthropic("model: Field required"));
    }
    match b.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            for (j, blk) in blocks.iter().enumerate() {
                block(&format!("system.{j}"), blk)?;
            }
        }
        Some(_) => return Err(Refusal::anthropic("system: Input should be a valid list")),
    }
    let Some(Value::Array(msgs)) = b.get("messages") else {
        return Err(Refusal::anthropic("messages: Field required"));
    };
    let system_ok = betas.has(MID_SYSTEM_BETA);
    for (i, m) in msgs.iter().enumerate() {
        message(i, m, system_ok)?;
    }
    pairing(msgs)
}

/// `thinking`: its type, and a budget below `max_tokens`; temperature 1 while it is on.
fn thinking(b: &Map<String, Value>, max: u64) -> Result<(), Refusal> {
    let Some(t) = b.get("thinking") else {
        return Ok(());
    };
    let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "disabled" => return Ok(()),
        "adaptive" => {}
        "enabled" => {
            let budget = t.get("budget_tokens").and_then(Value::as_u64).unwrap_or(0);
            if budget < 1024 {
                return Err(Refusal::anthropic(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                ));
            }
            if budget >= max {
                return Err(Refusal::anthropic("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"));
            }
        }
        other => {
            return Err(Refusal::anthropic(&format!(
                "thinking: Input tag '{other}' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"
            )))
        }
    }
    match b.get("temperature").and_then(Value::as_f64) {
        Some(t) if t != 1.0 => Err(Refusal::anthropic(
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility",
        )),
        _ => Ok(()),
    }
}

fn message(i: usize, m: &Value, system_ok: bool) -> Result<(), Refusal> {
    let Some(obj) = m.as_object() else {
        return Err(Refusal::anthropic(&format!(
            "messages.{i}: Input should be a valid dictionary"
        )));
    };
    if let Some(k) = unknown_key(obj, &["role", "content"]) {
        return Err(extra(&format!("messages.{i}.{k}")));
    }
    match obj.get("role").and_then(Value::as_str) {
        Some("user" | "assistant") => {}
        Some("system") if system_ok => {}
        _ => {
            return Err(Refusal::anthropic(&format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            )))
        }
    }
    match obj.get("content") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            for (j, blk) in blocks.iter().enumerate() {
                block(&format!("messages.{i}.content.{j}"), blk)?;
            }
            Ok(())
        }
        _ => Err(Refusal::anthropic(&format!(
            "messages.{i}.content: Field required"
        ))),
    }
}

/// One content block at `path`: a known type with only its own fields; a thinking block's
/// signature; a tool result's inner blocks.
fn block(path: &str, blk: &Value) -> Result<(), Refusal> {
    let ty = blk.get("type").and_then(Value::as_str).unwrap_or("");
    let Some(fields) = block_fields(ty) else {
        return Err(Refusal::anthropic(&format!(
            "{path}.type: Input tag '{ty}' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'search_result', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking', 'server_tool_use'"
        )));
    };
    if let Some(obj) = blk.as_object() {
        if let Some(k) = unknown_key(obj, fields) {
            return Err(extra(&format!("{path}.{ty}.{k}")));
        }
    }
    if ty == "thinking" && !signed(blk.get("signature")) {
        return Err(Refusal::anthropic(&format!(
            "{path}: Invalid `signature` in `thinking` block"
        )));
    }
    if ty == "tool_result" {
        if let Some(Value::Array(inner)) = blk.get("content") {
            for (k, b) in inner.iter().enumerate() {
                let t = b.get("type").and_then(Value::as_str).unwrap_or("");
                if !matches!(t, "text" | "image" | "document" | "search_result") {
                    return Err(Refusal::anthropic(&format!(
                        "{path}.tool_result.content.{k}.type: Input tag '{t}' found using 'type' does not match any of the expected tags: 'text', 'image', 'search_result', 'document'"
                    )));
                }
                block(&format!("{path}.tool_result.content.{k}"), b)?;
            }
        }
    }
    Ok(())
}

/// A signature Anthropic could have issued: non-empty base64.
fn signed(sig: Option<&Value>) -> bool {
    sig.and_then(Value::as_str).is_some_and(|s| {
        s.len() >= 8
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'-' | b'_'))
    })
}

/// The ids of the blocks of `ty` (`tool_use` ids or `tool_result` ids) in a message.
fn ids<'a>(m: &'a Value, ty: &str, key: &str) -> Vec<&'a str> {
    match m.get("content") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
            .filter_map(|b| b.get(key).and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every `tool_use` is answered by a `tool_result` in the next turn, and every
/// `tool_result` answers a `tool_use` of the turn before; runs of one role form one turn,
/// and `system` messages are not turns.
fn pairing(msgs: &[Value]) -> Result<(), Refusal> {
    // (role, index of the turn's first message, tool_use ids, tool_result ids)
    let mut turns: Vec<(&str, usize, Vec<&str>, Vec<&str>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "system" {
            continue;
        }
        let uses = ids(m, "tool_use", "id");
        let results = ids(m, "tool_result", "tool_use_id");
        match turns.last_mut() {
            Some(t) if t.0 == role => {
                t.2.extend(uses);
                t.3.extend(results);
            }
            _ => turns.push((role, i, uses, results)),
        }
    }
    for (k, t) in turns.iter().enumerate() {
        let prev: &[&str] = match k.checked_sub(1) {
            Some(p) => &turns[p].2,
            None => &[],
        };
        if let Some(id) = t.3.iter().find(|id| !prev.contains(id)) {
            return Err(Refusal::anthropic(&format!(
                "messages.{}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
                t.1
            )));
        }
        let next: &[&str] = turns.get(k + 1).map_or(&[], |n| &n.3);
        let missing: Vec<&str> =
            t.2.iter()
                .copied()
                .filter(|id| !next.contains(id))
                .collect();
        // The last assistant turn may end in tool use only when nothing follows it.
        if !missing.is_empty() && k + 1 < turns.len() {
            return Err(Refusal::anthropic(&format!(
                "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                t.1,
                missing.join(", ")
            )));
        }
    }
    Ok(())
}
