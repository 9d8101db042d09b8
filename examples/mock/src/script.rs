//! Scripted conversations for end-to-end runs with real clients (`make clients`): a prompt
//! containing `TOOLTEST:` is answered with a call of the client's shell tool (`Bash`,
//! `bash`, `exec_command`, `shell`) running `echo tool-ok-$((6*7))`, and `READTEST: /abs/file`
//! with a call of its `Read` tool on that file; once the tool's result is back, the answer
//! is the text `MOCK-ANSWER: the tool said: …` quoting it. Every other request gets the
//! behaviour's normal answer.
use bytes::Bytes;
use serde_json::Value;

use super::handler::Payload;
use super::request::Endpoint;
use super::sse::SseParts;
use super::tools::Call;

/// The command a `TOOLTEST:` prompt runs.
pub const TOOL_COMMAND: &str = "echo tool-ok-$((6*7))";
/// What the answer after a tool result starts with.
pub const ANSWER_PREFIX: &str = "MOCK-ANSWER: the tool said: ";

/// A scripted answer.
pub(crate) enum Script {
    Call(Call),
    Text(String),
}

/// The last turn of a conversation: the latest user text and, when the conversation ends
/// in tool results, their text.
struct Turn {
    prompt: String,
    result: Option<String>,
}

/// The scripted answer to `body` on `ep`, if its conversation is scripted.
pub(crate) fn plan(ep: Endpoint, body: &[u8]) -> Option<Script> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let turn = match ep {
        Endpoint::Chat => chat_turn(&v)?,
        Endpoint::Messages => messages_turn(&v)?,
        Endpoint::Responses => responses_turn(&v)?,
        _ => return None,
    };
    let read = turn.prompt.find("READTEST:");
    if !turn.prompt.contains("TOOLTEST:") && read.is_none() {
        return None;
    }
    if let Some(result) = turn.result {
        let quoted: String = result.trim().chars().take(200).collect();
        return Some(Script::Text(format!("{ANSWER_PREFIX}{quoted}")));
    }
    let names = tool_names(&v);
    let call = match read {
        Some(at) => read_call(&names, &turn.prompt[at + "READTEST:".len()..]),
        None => shell_call(&names),
    };
    Some(call.map_or_else(
        || Script::Text("MOCK-ANSWER: no tool to call".into()),
        Script::Call,
    ))
}

fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p.get("type").and_then(Value::as_str) {
                Some("image" | "image_url" | "input_image") => "[an image]".to_string(),
                _ => p
                    .get("text")
                    .or_else(|| p.get("content"))
                    .map(text)
                    .unwrap_or_default(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// Whether a chat message is a user message carrying only images (the way an image of a
/// tool result reaches an OpenAI-compatible server: right after the tool message).
fn images_only(m: &Value) -> bool {
    role(m) == "user"
        && m["content"].as_array().is_some_and(|parts| {
            !parts.is_empty() && parts.iter().all(|p| p["type"] == "image_url")
        })
}

fn chat_turn(v: &Value) -> Option<Turn> {
    let msgs = v.get("messages")?.as_array()?;
    let prompt = msgs
        .iter()
        .rev()
        .find(|m| role(m) == "user" && !images_only(m))?;
    let tail: Vec<&Value> = msgs
        .iter()
        .rev()
        .take_while(|m| role(m) == "tool" || images_only(m))
        .collect();
    let result = tail.iter().any(|m| role(m) == "tool").then(|| {
        tail.iter()
            .rev()
            .map(|m| text(&m["content"]))
            .collect::<Vec<_>>()
            .join("\n")
    });
    Some(Turn {
        prompt: text(&prompt["content"]),
        result,
    })
}

fn messages_turn(v: &Value) -> Option<Turn> {
    let msgs = v.get("messages")?.as_array()?;
    let last = msgs.last()?;
    let results: Vec<&Value> = last["content"]
        .as_array()
        .map(|b| b.iter().filter(|b| b["type"] == "tool_result").collect())
        .unwrap_or_default();
    let result = (!results.is_empty()).then(|| {
        results
            .iter()
            .map(|r| text(&r["content"]))
            .collect::<Vec<_>>()
            .join("\n")
    });
    let is_prompt = |m: &&Value| {
        role(m) == "user"
            && m["content"]
                .as_array()
                .is_none_or(|b| b.iter().any(|b| b["type"] == "text"))
    };
    let prompt = msgs.iter().rev().find(is_prompt)?;
    Some(Turn {
        prompt: text(&prompt["content"]),
        result,
    })
}

fn responses_turn(v: &Value) -> Option<Turn> {
    let input = match v.get("input")? {
        Value::String(s) => {
            return Some(Turn {
                prompt: s.clone(),
                result: None,
            })
        }
        Value::Array(items) => items,
        _ => return None,
    };
    let last = input.last()?;
    let result = (last["type"] == "function_call_output").then(|| text(&last["output"]));
    let prompt = input
        .iter()
        .rev()
        .find(|i| role(i) == "user")
        .map(|i| text(&i["content"]))?;
    Some(Turn { prompt, result })
}

/// The names of the request's tools, in any provider's shape.
fn tool_names(v: &Value) -> Vec<String> {
    let Some(tools) = v.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(|t| {
            t.pointer("/function/name")
                .or_else(|| t.get("name"))
                .and_then(Value::as_str)
        })
        .map(str::to_string)
        .collect()
}

fn shell_call(names: &[String]) -> Option<Call> {
    let has = |n: &str| names.iter().any(|x| x == n);
    let cmd = serde_json::to_string(TOOL_COMMAND).ok()?;
    let (name, args) = if has("Bash") {
        (
            "Bash",
            format!(r#"{{"command":{cmd},"description":"Print a test string"}}"#),
        )
    } else if has("bash") {
        (
            "bash",
            format!(r#"{{"command":{cmd},"description":"Print a test string"}}"#),
        )
    } else if has("exec_command") {
        ("exec_command", format!(r#"{{"cmd":{cmd}}}"#))
    } else if has("shell") {
        ("shell", format!(r#"{{"command":["bash","-lc",{cmd}]}}"#))
    } else {
        return None;
    };
    Some(Call {
        name: name.into(),
        args,
    })
}

fn read_call(names: &[String], rest: &str) -> Option<Call> {
    let path = rest.split_whitespace().find(|w| w.starts_with('/'))?;
    let name = ["Read", "read", "view"]
        .into_iter()
        .find(|n| names.iter().any(|x| x == n))?;
    let key = if name == "Read" {
        "file_path"
    } else {
        "filePath"
    };
    Some(Call {
        name: name.into(),
        args: serde_json::json!({ key: path }).to_string(),
    })
}

/// A normal one-chunk answer (`chunk 0 `) with its text replaced by `text`.
pub(crate) fn retext(payload: Payload, text: &str) -> Payload {
    let quoted = serde_json::Value::from(text).to_string();
    let inner = &quoted[1..quoted.len() - 1];
    let swap = |b: &Bytes| Bytes::from(String::from_utf8_lossy(b).replace("chunk 0 ", inner));
    match payload {
        Payload::Full(b, ctype) => Payload::Full(swap(&b), ctype),
        Payload::Sse(p) => Payload::Sse(SseParts {
            head: p.head.iter().map(swap).collect(),
            chunks: p.chunks.iter().map(swap).collect(),
            tail: p.tail.iter().map(swap).collect(),
        }),
    }
}
