//! What OpenAI Chat Completions (and Azure's deployments of it), OpenAI-compatible chat
//! servers and the Responses API refuse, with OpenAI's error objects.
use serde_json::{Map, Value};

use super::{unknown_key, Flavour, Refusal, Target};

/// Top-level fields of the Chat Completions reference.
pub const CHAT_FIELDS: &[&str] = &[
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
    "verbosity",
    "web_search_options",
];

/// Extra fields OpenAI-compatible servers (vLLM, DeepSeek) take on top of those.
const COMPAT_FIELDS: &[&str] = &[
    "thinking",
    "top_k",
    "min_p",
    "repetition_penalty",
    "chat_template_kwargs",
    "enable_thinking",
];

/// Top-level fields of the Responses reference (`client_metadata` is what Codex sends to
/// OpenAI's own endpoint).
const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "previous_response_id",
    "conversation",
    "reasoning",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "top_logprobs",
    "truncation",
    "user",
    "include",
    "text",
    "service_tier",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "background",
    "client_metadata",
];

const ROLES: &[&str] = &[
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
];
const PART_TYPES: &[&str] = &[
    "text",
    "image_url",
    "input_audio",
    "refusal",
    "audio",
    "file",
];
/// OpenAI's limits: `user` and tool-call ids.
const MAX_USER: usize = 64;
const MAX_CALL_ID: usize = 40;

/// o1/o3/o4 and gpt-5 families: `max_completion_tokens` only, default temperature only.
pub(crate) fn reasoning_model(model: &str) -> bool {
    let m = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5"].iter().any(|p| {
        m.strip_prefix(p)
            .is_some_and(|r| r.is_empty() || r.starts_with(['-', '.']))
    })
}

/// A Chat Completions request.
pub(crate) fn chat(t: &Target<'_>, b: &Map<String, Value>) -> Result<(), Refusal> {
    let compat = t.flavour.chat_only();
    if let Some(k) = b
        .keys()
        .map(String::as_str)
        .find(|k| !CHAT_FIELDS.contains(k) && (!compat || !COMPAT_FIELDS.contains(k)))
    {
        let msg = format!("Unrecognized request argument supplied: {k}");
        return Err(Refusal::openai(&msg, None, None));
    }
    let model = b
        .get("model")
        .and_then(Value::as_str)
        .or(t.path_model)
        .ok_or_else(|| Refusal::openai("you must provide a model parameter", None, None))?;
    if !compat && reasoning_model(model) {
        reasoning_limits(b)?;
    }
    if let Some(u) = b.get("user").and_then(Value::as_str) {
        too_long("user", u, MAX_USER)?;
    }
    tools(b.get("tools"))?;
    let Some(Value::Array(msgs)) = b.get("messages") else {
        return Err(Refusal::openai(
            "Missing required parameter: 'messages'.",
            Some("messages"),
            Some("missing_required_parameter"),
        ));
    };
    for (i, m) in msgs.iter().enumerate() {
        message(i, m)?;
    }
    tool_sequence(msgs)?;
    if t.flavour == Flavour::DeepseekThinking && thinking_on(b) {
        reasoning_history(msgs)?;
    }
    Ok(())
}

/// A Responses request: its top-level fields.
pub(crate) fn responses(b: &Map<String, Value>) -> Result<(), Refusal> {
    if let Some(k) = unknown_key(b, RESPONSES_FIELDS) {
        let msg = format!("Unknown parameter: '{k}'.");
        return Err(Refusal::openai(&msg, Some(k), Some("unknown_parameter")));
    }
    if !b.contains_key("model") {
        return Err(Refusal::openai(
            "Missing required parameter: 'model'.",
            Some("model"),
            Some("missing_required_parameter"),
        ));
    }
    Ok(())
}

/// Reasoning models refuse `max_tokens` and a temperature other than 1.
fn reasoning_limits(b: &Map<String, Value>) -> Result<(), Refusal> {
    if b.contains_key("max_tokens") {
        return Err(Refusal::openai(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            Some("max_tokens"),
            Some("unsupported_parameter"),
        ));
    }
    match b.get("temperature").and_then(Value::as_f64) {
        Some(t) if t != 1.0 => {
            let msg = format!("Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported.");
            Err(Refusal::openai(
                &msg,
                Some("temperature"),
                Some("unsupported_value"),
            ))
        }
        _ => Ok(()),
    }
}

fn too_long(param: &str, s: &str, max: usize) -> Result<(), Refusal> {
    let n = s.chars().count();
    if n <= max {
        return Ok(());
    }
    let msg = format!("Invalid '{param}': string too long. Expected a string with maximum length {max}, but got a string with length {n} instead.");
    Err(Refusal::openai(
        &msg,
        Some(param),
        Some("string_above_max_length"),
    ))
}

/// Function names match `^[a-zA-Z0-9_-]{1,64}$`.
fn tools(tools: Option<&Value>) -> Result<(), Refusal> {
    let Some(Value::Array(tools)) = tools else {
        return Ok(());
    };
    for (i, t) in tools.iter().enumerate() {
        let Some(name) = t.pointer("/function/name").and_then(Value::as_str) else {
            continue;
        };
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
        if !ok {
            let p = format!("tools[{i}].function.name");
            let msg = format!("Invalid '{p}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.");
            return Err(Refusal::openai(&msg, Some(&p), Some("invalid_value")));
        }
    }
    Ok(())
}

/// One message: its role, its content parts, its tool-call ids.
fn message(i: usize, m: &Value) -> Result<(), Refusal> {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("");
    if !ROLES.contains(&role) {
        let msg = format!("Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.");
        let p = format!("messages[{i}].role");
        return Err(Refusal::openai(&msg, Some(&p), Some("invalid_value")));
    }
    if let Some(Value::Array(parts)) = m.get("content") {
        for (j, part) in parts.iter().enumerate() {
            let ty = part.get("type").and_then(Value::as_str).unwrap_or("");
            if !PART_TYPES.contains(&ty) {
                let msg = format!("Invalid value: '{ty}'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', 'audio', and 'file'.");
                let p = format!("messages[{i}].content[{j}].type");
                return Err(Refusal::openai(&msg, Some(&p), Some("invalid_value")));
            }
            if ty == "image_url" && role != "user" {
                let msg = format!("Invalid 'messages[{i}]'. Image URLs are only allowed for messages with role 'user', but this message with role '{role}' contains an image URL.");
                let p = format!("messages[{i}]");
                return Err(Refusal::openai(&msg, Some(&p), Some("invalid_value")));
            }
        }
    }
    for (j, id) in call_ids(m).into_iter().enumerate() {
        too_long(
            &format!("messages[{i}].tool_calls[{j}].id"),
            id,
            MAX_CALL_ID,
        )?;
    }
    Ok(())
}

/// The ids of an assistant message's `tool_calls`.
fn call_ids(m: &Value) -> Vec<&str> {
    match m.get("tool_calls") {
        Some(Value::Array(calls)) => calls
            .iter()
            .filter_map(|c| c.get("id").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// A `tool` message answers a call of the assistant message right before its run of tool
/// messages; an assistant message with `tool_calls` is followed by an answer to each.
fn tool_sequence(msgs: &[Value]) -> Result<(), Refusal> {
    let mut open: Vec<&str> = Vec::new();
    let mut calls_at = 0usize;
    let mut calls: Vec<&str> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            if !calls.contains(&id) {
                let p = format!("messages.[{i}].role");
                return Err(Refusal::openai(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    Some(&p),
                    None,
                ));
            }
            open.retain(|o| *o != id);
            continue;
        }
        unanswered(&open, calls_at)?;
        calls = call_ids(m);
        open = calls.clone();
        calls_at = i;
    }
    unanswered(&open, calls_at)
}

fn unanswered(open: &[&str], at: usize) -> Result<(), Refusal> {
    if open.is_empty() {
        return Ok(());
    }
    let msg = format!("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}", open.join(", "));
    let p = format!("messages.[{at}].role");
    Err(Refusal::openai(&msg, Some(&p), None))
}

/// DeepSeek's thinking mode: on unless `thinking: {type: disabled}` (the flavour plays a
/// thinking model).
fn thinking_on(b: &Map<String, Value>) -> bool {
    b.get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        != Some("disabled")
}

/// In thinking mode, every assistant turn with `tool_calls` after the last user message
/// carries its `reasoning_content` back.
fn reasoning_history(msgs: &[Value]) -> Result<(), Refusal> {
    let last_user = msgs
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .unwrap_or(0);
    for (i, m) in msgs.iter().enumerate().skip(last_user) {
        let assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
        let has_reasoning = m.get("reasoning_content").is_some_and(Value::is_string);
        if assistant && !call_ids(m).is_empty() && !has_reasoning {
            let msg = format!(
                "Missing `reasoning_content` field in the assistant message at message index {i}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
            );
            return Err(Refusal::openai(&msg, None, Some("invalid_request_error")));
        }
    }
    Ok(())
}
