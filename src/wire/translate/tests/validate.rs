//! Validators for translated request bodies: what each provider's API reference accepts, so a
//! translation the provider would answer with a 400 fails here. Each returns the first
//! problem found (`Err` with the path), written from:
//! OpenAI <https://platform.openai.com/docs/api-reference/chat/create>,
//! Anthropic <https://docs.anthropic.com/en/api/messages>,
//! Gemini <https://ai.google.dev/api/generate-content#request-body>.

use std::collections::HashSet;

use serde_json::{Map, Value};
use switchyard_mock::fields::{
    anthropic_messages_without_beta, GEMINI_GENERATION, GEMINI_TOP, OPENAI_CHAT,
};

type Check = Result<(), String>;

fn fail<T>(msg: impl Into<String>) -> Result<T, String> {
    Err(msg.into())
}

fn keys_within(object: &Map<String, Value>, allowed: &[&str], at: &str) -> Check {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => fail(format!("{at}: `{k}` is not an accepted field")),
        None => Ok(()),
    }
}

fn obj<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{at}: not an object"))
}

fn arr<'a>(value: &'a Value, at: &str) -> Result<&'a Vec<Value>, String> {
    value
        .as_array()
        .ok_or_else(|| format!("{at}: not an array"))
}

/// Does `key` occur anywhere inside `v`?
fn has_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(m) => m.iter().any(|(k, x)| k == key || has_key(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        _ => false,
    }
}

pub fn openai(body: &Value) -> Check {
    let top = obj(body, "body")?;
    keys_within(top, OPENAI_CHAT, "body")?;
    if top.contains_key("max_tokens") && top.contains_key("max_completion_tokens") {
        return fail("both max_tokens and max_completion_tokens");
    }
    if let Some(u) = top.get("user") {
        let chars = u.as_str().map_or(usize::MAX, |s| s.chars().count());
        if chars > 64 {
            return fail(format!("user has {chars} characters; OpenAI accepts 64"));
        }
    }
    if top.contains_key("stream_options") && top.get("stream") != Some(&Value::Bool(true)) {
        return fail("stream_options without stream");
    }
    if let Some(e) = top.get("reasoning_effort") {
        let ok = ["none", "minimal", "low", "medium", "high", "xhigh"];
        if !e.as_str().is_some_and(|e| ok.contains(&e)) {
            return fail(format!("reasoning_effort {e}"));
        }
    }
    let msgs = arr(top.get("messages").unwrap_or(&Value::Null), "messages")?;
    if has_key(&Value::Array(msgs.clone()), "cache_control") {
        return fail("cache_control in messages");
    }
    openai_messages(msgs)
}

fn openai_messages(msgs: &[Value]) -> Check {
    // Tool-call ids of the last assistant turn still waiting for their `tool` message.
    let mut open: Vec<String> = Vec::new();
    for (i, message) in msgs.iter().enumerate() {
        let at = format!("messages[{i}]");
        let message = obj(message, &at)?;
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "tool" && !open.is_empty() {
            return fail(format!(
                "{at}: {role} message before the tool results {open:?}"
            ));
        }
        match role {
            "system" | "developer" => {
                keys_within(message, &["role", "content", "name"], &at)?;
                text_only(message.get("content"), &at)?;
            }
            "user" => {
                keys_within(message, &["role", "content", "name"], &at)?;
                user_content(message.get("content"), &at)?;
            }
            "assistant" => {
                // `reasoning_content`: DeepSeek's (and other compatible servers') extension.
                let allowed = [
                    "role",
                    "content",
                    "refusal",
                    "tool_calls",
                    "name",
                    "reasoning_content",
                ];
                keys_within(message, &allowed, &at)?;
                open = assistant_calls(message, &at)?;
            }
            "tool" => {
                keys_within(message, &["role", "content", "tool_call_id"], &at)?;
                text_only(message.get("content"), &at)?;
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let Some(k) = open.iter().position(|o| o == id) else {
                    return fail(format!("{at}: tool message `{id}` answers no open call"));
                };
                open.remove(k);
            }
            other => return fail(format!("{at}: role `{other}`")),
        }
    }
    Ok(())
}

fn assistant_calls(message: &Map<String, Value>, at: &str) -> Result<Vec<String>, String> {
    let content = message.get("content").unwrap_or(&Value::Null);
    let calls = message.get("tool_calls").map(|c| arr(c, at)).transpose()?;
    if content.is_null() && calls.is_none_or(|c| c.is_empty()) {
        return fail(format!(
            "{at}: assistant message with neither content nor tool calls"
        ));
    }
    if !content.is_null() {
        text_only(Some(content), at)?;
    }
    let mut ids = Vec::new();
    for (j, call) in calls.into_iter().flatten().enumerate() {
        let at = format!("{at}.tool_calls[{j}]");
        let call = obj(call, &at)?;
        keys_within(call, &["id", "type", "function"], &at)?;
        let id = call.get("id").and_then(Value::as_str).unwrap_or("");
        if id.is_empty() || id.len() > 40 {
            return fail(format!("{at}.id `{id}`: must have 1 to 40 characters"));
        }
        let function = obj(call.get("function").unwrap_or(&Value::Null), &at)?;
        let args = function
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !serde_json::from_str::<Value>(args).is_ok_and(|v| v.is_object()) {
            return fail(format!("{at}: arguments are not a JSON object"));
        }
        ids.push(id.to_string());
    }
    Ok(ids)
}

fn text_only(content: Option<&Value>, at: &str) -> Check {
    match content {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) => {
            for p in parts {
                if p.get("type") != Some(&Value::from("text")) || !p["text"].is_string() {
                    return fail(format!("{at}: a part that is not text: {p}"));
                }
            }
            Ok(())
        }
        other => fail(format!("{at}: content {other:?}")),
    }
}

fn user_content(content: Option<&Value>, at: &str) -> Check {
    match content {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) if !parts.is_empty() => {
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") if p["text"].is_string() => {}
                    Some("image_url") => {
                        let url = p["image_url"]["url"].as_str().unwrap_or("");
                        if !(url.starts_with("data:image/") || url.starts_with("http")) {
                            return fail(format!("{at}: image url `{url}`"));
                        }
                    }
                    _ => return fail(format!("{at}: user part {p}")),
                }
            }
            Ok(())
        }
        other => fail(format!("{at}: content {other:?}")),
    }
}

pub fn anthropic(body: &Value) -> Check {
    let top = obj(body, "body")?;
    keys_within(top, &anthropic_messages_without_beta(), "body")?;
    if !top.get("max_tokens").is_some_and(Value::is_u64) {
        return fail("max_tokens is required");
    }
    if let Some(m) = top.get("metadata") {
        keys_within(obj(m, "metadata")?, &["user_id"], "metadata")?;
    }
    match top.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) => {
            for b in blocks {
                keys_within(
                    obj(b, "system")?,
                    &["type", "text", "cache_control"],
                    "system",
                )?;
                non_empty_text(b, "system")?;
            }
        }
        Some(other) => return fail(format!("system {other}")),
    }
    let marks = count_key(body, "cache_control");
    if marks > 4 {
        return fail(format!("{marks} cache_control blocks; Anthropic accepts 4"));
    }
    let msgs = arr(top.get("messages").unwrap_or(&Value::Null), "messages")?;
    anthropic_messages(msgs)
}

fn count_key(value: &Value, key: &str) -> usize {
    match value {
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| usize::from(k == key) + count_key(x, key))
            .sum(),
        Value::Array(a) => a.iter().map(|x| count_key(x, key)).sum(),
        _ => 0,
    }
}

fn non_empty_text(block: &Value, at: &str) -> Check {
    if block["type"] == "text" && block["text"].as_str().is_none_or(str::is_empty) {
        return fail(format!("{at}: empty or missing text"));
    }
    Ok(())
}

fn anthropic_messages(msgs: &[Value]) -> Check {
    let mut prev_role = "";
    let mut calls: HashSet<String> = HashSet::new();
    for (i, message) in msgs.iter().enumerate() {
        let at = format!("messages[{i}]");
        let message = obj(message, &at)?;
        keys_within(message, &["role", "content"], &at)?;
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "assistant" {
            return fail(format!("{at}: role `{role}`"));
        }
        if role == prev_role {
            return fail(format!("{at}: two {role} messages in a row"));
        }
        prev_role = role;
        let blocks = match message.get("content") {
            Some(Value::String(s)) if !s.is_empty() => continue,
            Some(Value::Array(b)) if !b.is_empty() => b,
            other => return fail(format!("{at}: content {other:?}")),
        };
        let answered = anthropic_blocks(blocks, role, &calls, &at)?;
        calls = answered;
    }
    Ok(())
}

/// Check one message's blocks; returns the tool_use ids an assistant message opened.
fn anthropic_blocks(
    blocks: &[Value],
    role: &str,
    calls: &HashSet<String>,
    at: &str,
) -> Result<HashSet<String>, String> {
    let mut opened = HashSet::new();
    let mut past_results = false;
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{j}]");
        let ty = b["type"].as_str().unwrap_or("");
        match (ty, role) {
            ("text", _) => non_empty_text(b, &at)?,
            ("image", "user") => {}
            ("tool_use", "assistant") => {
                let id = b["id"].as_str().unwrap_or("");
                if id.is_empty()
                    || !id
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
                {
                    return fail(format!("{at}: tool_use id `{id}`"));
                }
                opened.insert(id.to_string());
            }
            ("tool_result", "user") => {
                if past_results {
                    return fail(format!("{at}: tool_result after other content"));
                }
                let id = b["tool_use_id"].as_str().unwrap_or("");
                if !calls.contains(id) {
                    return fail(format!("{at}: tool_result `{id}` answers no tool_use"));
                }
                if let Some(Value::Array(inner)) = b.get("content") {
                    for x in inner {
                        non_empty_text(x, &at)?;
                    }
                }
            }
            ("thinking", "assistant") => {
                if b["signature"].as_str().is_none_or(str::is_empty) {
                    return fail(format!("{at}: thinking without a signature"));
                }
            }
            _ => return fail(format!("{at}: a `{ty}` block in a {role} message")),
        }
        past_results |= ty != "tool_result";
    }
    Ok(opened)
}

/// Exactly one of these per part.
const GEMINI_DATA: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
];

pub fn gemini(body: &Value) -> Check {
    let top = obj(body, "body")?;
    keys_within(top, GEMINI_TOP, "body")?;
    if let Some(g) = top.get("generationConfig") {
        keys_within(
            obj(g, "generationConfig")?,
            GEMINI_GENERATION,
            "generationConfig",
        )?;
    }
    if let Some(s) = top.get("systemInstruction") {
        for p in arr(&s["parts"], "systemInstruction.parts")? {
            keys_within(obj(p, "systemInstruction")?, &["text"], "systemInstruction")?;
        }
    }
    let contents = arr(top.get("contents").unwrap_or(&Value::Null), "contents")?;
    for (i, content) in contents.iter().enumerate() {
        let at = format!("contents[{i}]");
        let content = obj(content, &at)?;
        keys_within(content, &["role", "parts"], &at)?;
        let role = content.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "model" {
            return fail(format!("{at}: role `{role}`"));
        }
        let parts = arr(content.get("parts").unwrap_or(&Value::Null), &at)?;
        if parts.is_empty() {
            return fail(format!("{at}: no parts"));
        }
        for (j, part) in parts.iter().enumerate() {
            let at = format!("{at}.parts[{j}]");
            let part = obj(part, &at)?;
            let data = part
                .keys()
                .filter(|k| GEMINI_DATA.contains(&k.as_str()))
                .count();
            let meta = ["thought", "thoughtSignature"];
            keys_within(part, &[GEMINI_DATA, &meta].concat(), &at)?;
            if data != 1 {
                return fail(format!("{at}: {data} data fields"));
            }
            if let Some(f) = part.get("functionResponse") {
                if f["name"].as_str().is_none_or(str::is_empty) {
                    return fail(format!("{at}: functionResponse without a name"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// Each validator rejects what its provider answers with a 400.
    #[test]
    fn the_validators_reject_what_the_providers_reject() {
        let ok = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
        assert_eq!(super::openai(&ok), Ok(()));
        let bad_openai = [
            json!({"model": "m", "messages": [{"role": "user", "content": "q", "cache_control": {"type": "ephemeral"}}]}),
            json!({"model": "m", "user": "x".repeat(65), "messages": []}),
            json!({"model": "m", "max_tokens": 1, "max_completion_tokens": 1, "messages": []}),
            json!({"model": "m", "thinking": {}, "messages": []}),
            json!({"model": "m", "messages": [
                {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "user", "content": "too early"}]}),
            json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "a", "content": "r"}]}),
            json!({"model": "m", "messages": [
                {"role": "assistant", "content": null, "tool_calls": [{"id": "x".repeat(41), "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}),
        ];
        for b in bad_openai {
            assert!(super::openai(&b).is_err(), "accepted {b}");
        }
        let ok =
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]});
        assert_eq!(super::anthropic(&ok), Ok(()));
        let bad_anthropic = [
            json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "s"}]}),
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}),
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": ""}, {"type": "text", "text": "x"}]}]}),
            json!({"model": "m", "max_tokens": 5, "metadata": {"user_id": "u", "session": "s"}, "messages": [{"role": "user", "content": "a"}]}),
            json!({"model": "m", "max_tokens": 5, "context_management": {}, "messages": [{"role": "user", "content": "a"}]}),
        ];
        for b in bad_anthropic {
            assert!(super::anthropic(&b).is_err(), "accepted {b}");
        }
        let ok = json!({"contents": [{"role": "user", "parts": [{"text": "q"}]}]});
        assert_eq!(super::gemini(&ok), Ok(()));
        let bad_gemini = [
            json!({"contents": [{"role": "system", "parts": [{"text": "q"}]}]}),
            json!({"contents": [{"role": "user", "parts": [{"text": "q", "inlineData": {}}]}]}),
            json!({"contents": [], "generationConfig": {"reasoning_effort": "high"}}),
            json!({"contents": [], "model": "m"}),
        ];
        for b in bad_gemini {
            assert!(super::gemini(&b).is_err(), "accepted {b}");
        }
    }
}
