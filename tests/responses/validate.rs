//! What each provider accepts, as checks on a translated request: the top-level fields its
//! reference lists (OpenAI and Anthropic reject unknown ones), roles and their order, tool
//! calls answered by their results, tool names in the allowed alphabet and length.

use serde_json::Value;
use switchyard_mock::fields::{anthropic_messages_without_beta, GEMINI_TOP, OPENAI_CHAT};

fn fields(body: &Value, allowed: &[&str]) -> Result<(), String> {
    let object = body.as_object().ok_or("the body is not an object")?;
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!("unknown request field `{k}`")),
        None => Ok(()),
    }
}

/// `^[a-zA-Z0-9_-]{1,64}$`: function names in OpenAI, Anthropic and Gemini.
fn tool_name(name: &Value) -> Result<(), String> {
    let text = name.as_str().ok_or("a tool name is not a string")?;
    let ok = !text.is_empty()
        && text.len() <= 64
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then_some(())
        .ok_or(format!("tool name `{text}` is not accepted"))
}

pub fn chat(body: &Value) -> Result<(), String> {
    fields(body, OPENAI_CHAT)?;
    let msgs = body["messages"].as_array().ok_or("no messages")?;
    if msgs.is_empty() {
        return Err("messages is empty".into());
    }
    let mut waiting: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"]
            .as_str()
            .ok_or(format!("messages[{i}] has no role"))?;
        if role == "tool" {
            let id = m["tool_call_id"]
                .as_str()
                .ok_or("tool message without tool_call_id")?;
            let at = waiting.iter().position(|w| w == id).ok_or(format!(
                "messages[{i}]: tool result `{id}` does not follow its call"
            ))?;
            waiting.remove(at);
            if !m["content"].is_string() {
                return Err(format!("messages[{i}]: tool content is not text"));
            }
            continue;
        }
        if !waiting.is_empty() {
            return Err(format!(
                "messages[{i}]: tool calls {waiting:?} have no result"
            ));
        }
        match role {
            "system" | "developer" | "user" => {}
            "assistant" => {
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    if !c["function"]["arguments"].is_string() {
                        return Err(format!("messages[{i}]: arguments are not a string"));
                    }
                    tool_name(&c["function"]["name"])?;
                    waiting.push(c["id"].as_str().ok_or("a call without id")?.to_string());
                }
            }
            r => return Err(format!("messages[{i}]: role `{r}`")),
        }
        match &m["content"] {
            Value::String(_) | Value::Null => {}
            Value::Array(parts) => {
                for p in parts {
                    if !matches!(p["type"].as_str(), Some("text" | "image_url" | "file")) {
                        return Err(format!("messages[{i}]: part {p}"));
                    }
                }
            }
            c => return Err(format!("messages[{i}]: content {c}")),
        }
    }
    for t in body["tools"].as_array().into_iter().flatten() {
        if t["type"] != "function" || !t["function"]["parameters"].is_object() {
            return Err(format!("tool {t}"));
        }
        tool_name(&t["function"]["name"])?;
    }
    Ok(())
}

pub fn anthropic(body: &Value) -> Result<(), String> {
    fields(body, &anthropic_messages_without_beta())?;
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens is required".into());
    }
    let msgs = body["messages"].as_array().ok_or("no messages")?;
    let mut expect = "user";
    let mut calls: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().ok_or("no role")?;
        if role != expect {
            return Err(format!("messages[{i}] is `{role}`, expected `{expect}`"));
        }
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            c => return Err(format!("messages[{i}]: content {c}")),
        };
        let results: Vec<&str> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        if role == "user" {
            let mut want = std::mem::take(&mut calls);
            want.sort();
            let mut got: Vec<String> = results.iter().map(|s| s.to_string()).collect();
            got.sort();
            if want != got {
                return Err(format!("messages[{i}]: results {got:?} for calls {want:?}"));
            }
        }
        for b in &blocks {
            match (role, b["type"].as_str()) {
                (_, Some("text")) | ("user", Some("image" | "document" | "tool_result")) => {}
                ("assistant", Some("thinking" | "redacted_thinking")) => {}
                ("assistant", Some("tool_use")) => {
                    tool_name(&b["name"])?;
                    if !b["input"].is_object() {
                        return Err("tool_use input is not an object".into());
                    }
                    calls.push(b["id"].as_str().ok_or("tool_use without id")?.to_string());
                }
                (r, t) => return Err(format!("messages[{i}]: {t:?} block in a {r} turn")),
            }
        }
        expect = if role == "user" { "assistant" } else { "user" };
    }
    if !calls.is_empty() {
        return Err(format!("tool calls {calls:?} end the conversation"));
    }
    for t in body["tools"].as_array().into_iter().flatten() {
        tool_name(&t["name"])?;
        if t["input_schema"]["type"] != "object" {
            return Err(format!("tool {} has no object input_schema", t["name"]));
        }
    }
    Ok(())
}

pub fn gemini(body: &Value) -> Result<(), String> {
    fields(body, GEMINI_TOP)?;
    let contents = body["contents"].as_array().ok_or("no contents")?;
    for (i, c) in contents.iter().enumerate() {
        if !matches!(c["role"].as_str(), Some("user" | "model")) {
            return Err(format!("contents[{i}] role {}", c["role"]));
        }
        if c["parts"].as_array().is_none_or(|p| p.is_empty()) {
            return Err(format!("contents[{i}] has no parts"));
        }
    }
    for t in body["tools"].as_array().into_iter().flatten() {
        for f in t["functionDeclarations"].as_array().into_iter().flatten() {
            tool_name(&f["name"])?;
        }
    }
    Ok(())
}
