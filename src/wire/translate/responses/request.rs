//! A Responses request as Chat Completions: every top-level field mapped, dropped (listed in
//! `DROPPED`, README.md says why) or refused with its path; the `input` items as messages.
//! Other upstream formats get the Chat request through `translate_request`.

use serde_json::{json, Map, Value};

use super::super::refusal::{Path, TranslateError};
use super::super::{translate_request, MaxTokensField, RequestOptions, WireFormat};
use super::{tools, ResponsesRequest};

/// Fields that change nothing a translated upstream could honour (README.md says why).
const DROPPED: &[&str] = &[
    "model",
    "include",
    "client_metadata",
    "metadata",
    "truncation",
    "service_tier",
    "stream_options",
    "prompt_cache_retention",
];

/// Translate a Responses request body for an upstream of format `upstream`.
pub fn request_to(
    upstream: WireFormat,
    body: &[u8],
    opts: &RequestOptions,
) -> Result<ResponsesRequest, TranslateError> {
    let request: Value = serde_json::from_slice(body).map_err(|e| {
        TranslateError::invalid("", format!("request body is not valid JSON ({e})"))
    })?;
    let (chat, mut out) = to_chat(request, opts)?;
    let chat = Value::Object(chat).to_string().into_bytes();
    out.body = match upstream {
        WireFormat::OpenAi => chat,
        _ => {
            translate_request(WireFormat::OpenAi, upstream, &chat, opts)
                .map_err(|e| in_chat_form(e, upstream))?
                .body
        }
    };
    Ok(out)
}

/// A refusal of the second step names the field of the Chat form it came from.
fn in_chat_form(error: TranslateError, upstream: WireFormat) -> TranslateError {
    TranslateError {
        kind: error.kind,
        field: String::new(),
        reason: format!(
            "the request, translated to Chat Completions for {}, is refused there: {error}",
            upstream.name()
        ),
    }
}

/// The request being read: the Chat body so far and what the rest of the reading needs.
struct Reading<'a> {
    chat: Map<String, Value>,
    out: ResponsesRequest,
    system: Option<String>,
    input: Option<&'a Value>,
    namespaced: tools::Namespaced,
}

/// The Chat Completions body and the facts of the translation (`body` still empty).
fn to_chat(
    value: Value,
    opts: &RequestOptions,
) -> Result<(Map<String, Value>, ResponsesRequest), TranslateError> {
    let Value::Object(map) = value else {
        return Err(TranslateError::invalid(
            "",
            "request body must be a JSON object",
        ));
    };
    let mut reading = Reading {
        chat: Map::new(),
        out: ResponsesRequest {
            body: Vec::new(),
            stream: false,
            dropped: Vec::new(),
        },
        system: None,
        input: None,
        namespaced: tools::Namespaced::default(),
    };
    reading.chat.insert("model".into(), opts.model.into());
    for (k, value) in &map {
        if value.is_null() || DROPPED.contains(&k.as_str()) {
            continue;
        }
        let root = Path::ROOT;
        let at = root.key(k);
        if !generation(k, value, at, opts, &mut reading.chat)? {
            reading.field(k, value, at)?;
        }
    }
    let Reading {
        mut chat,
        out,
        system,
        input,
        namespaced,
    } = reading;
    if !chat.contains_key("tools") {
        // OpenAI refuses both without tools (all of them may have been dropped).
        chat.remove("parallel_tool_calls");
        chat.remove("tool_choice");
    }
    let input = input.ok_or_else(|| TranslateError::invalid("input", "is required"))?;
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(json!({"role": "system", "content": s}));
    }
    super::items::read(input, opts.join_text_parts, &namespaced, &mut messages)?;
    chat.insert("messages".into(), Value::Array(messages));
    if out.stream {
        chat.insert("stream".into(), true.into());
        chat.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok((chat, out))
}

impl<'a> Reading<'a> {
    /// A field of the conversation, its tools or the upstream state it needs.
    fn field(&mut self, k: &str, value: &'a Value, at: Path) -> Result<(), TranslateError> {
        match k {
            "instructions" => self.system = Some(string(value, at)?.to_string()),
            "input" => self.input = Some(value),
            "stream" => self.out.stream = boolean(value, at)?,
            "tools" => {
                let converted = tools::read(value, at)?;
                if !converted.chat.is_empty() {
                    self.chat
                        .insert("tools".into(), Value::Array(converted.chat));
                }
                self.namespaced = converted.namespaced;
                self.out.dropped.extend(converted.dropped);
            }
            "tool_choice" => {
                self.chat.insert(k.into(), tools::choice(value, at)?);
            }
            "parallel_tool_calls" => {
                self.chat.insert(k.into(), boolean(value, at)?.into());
            }
            "top_logprobs" if value.as_u64() == Some(0) => {}
            "store" | "background" if value.as_bool() == Some(false) => {}
            "store" | "background" | "previous_response_id" | "conversation" | "prompt" => {
                return Err(needs_native(at))
            }
            _ => {
                return Err(TranslateError::unsupported(
                    at,
                    "has no Chat Completions counterpart on this translated channel; remove it \
                     or route the model to a channel that serves Responses natively",
                ))
            }
        }
        Ok(())
    }
}

/// A field of how the answer is generated, mapped into `chat`; `false`: not one of those.
fn generation(
    k: &str,
    value: &Value,
    at: Path,
    opts: &RequestOptions,
    chat: &mut Map<String, Value>,
) -> Result<bool, TranslateError> {
    match k {
        "max_output_tokens" => {
            let max_output = value
                .as_u64()
                .ok_or_else(|| TranslateError::invalid(at, "must be a positive integer"))?;
            let key = match opts.max_tokens_field {
                MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
                MaxTokensField::MaxTokens => "max_tokens",
            };
            chat.insert(key.into(), max_output.into());
        }
        "temperature" | "top_p" => {
            value
                .as_f64()
                .ok_or_else(|| TranslateError::invalid(at, "must be a number"))?;
            chat.insert(k.into(), value.clone());
        }
        "reasoning" => reasoning(value, at, chat)?,
        "text" => text(value, at, chat)?,
        "user" | "safety_identifier" => {
            let user_id = string(value, at)?;
            // `user` wins over `safety_identifier` whatever the key order.
            if k == "user" || !chat.contains_key("user") {
                chat.insert("user".into(), user_id.into());
            }
        }
        "prompt_cache_key" => {
            chat.insert(k.into(), string(value, at)?.into());
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A field that needs state kept at the upstream (R16.4).
fn needs_native(at: Path) -> TranslateError {
    TranslateError::unsupported(
        at,
        "needs state kept by the upstream (a stored response, conversation, prompt or \
         background job): this request can only go to a channel that serves the Responses \
         API natively, and none in this route does. Send the whole conversation in `input` \
         with `store: false`, or route the model to a native Responses channel",
    )
}

/// `reasoning: {effort, summary}`: the effort as `reasoning_effort`; the summary is given
/// when the upstream reasons visibly.
fn reasoning(value: &Value, at: Path, chat: &mut Map<String, Value>) -> Result<(), TranslateError> {
    if !value.is_object() {
        return Err(TranslateError::invalid(at, "must be an object"));
    }
    if let Some(effort) = value.get("effort").filter(|effort| !effort.is_null()) {
        let effort = string(effort, at.key("effort"))?;
        chat.insert("reasoning_effort".into(), effort.into());
    }
    Ok(())
}

/// `text: {format, verbosity}`: `json_schema` and `json_object` as `response_format`.
fn text(value: &Value, at: Path, chat: &mut Map<String, Value>) -> Result<(), TranslateError> {
    let fp = at.key("format");
    let format = &value["format"];
    match format["type"].as_str() {
        None if format.is_null() => Ok(()),
        Some("text") => Ok(()),
        Some("json_object") => {
            chat.insert("response_format".into(), json!({"type": "json_object"}));
            Ok(())
        }
        Some("json_schema") => {
            let mut js = Map::new();
            let name = format["name"].as_str().unwrap_or("output");
            js.insert("name".into(), name.into());
            let schema = format
                .get("schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| TranslateError::invalid(fp.key("schema"), "is required"))?;
            js.insert("schema".into(), schema.clone());
            for k in ["strict", "description"] {
                if let Some(x) = format.get(k).filter(|x| !x.is_null()) {
                    js.insert(k.into(), x.clone());
                }
            }
            chat.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": js}),
            );
            Ok(())
        }
        _ => Err(TranslateError::invalid(
            fp.key("type"),
            "must be text, json_object or json_schema",
        )),
    }
}

pub(super) fn string<'v>(value: &'v Value, at: Path) -> Result<&'v str, TranslateError> {
    value
        .as_str()
        .ok_or_else(|| TranslateError::invalid(at, "must be a string"))
}

fn boolean(value: &Value, at: Path) -> Result<bool, TranslateError> {
    value
        .as_bool()
        .ok_or_else(|| TranslateError::invalid(at, "must be true or false"))
}
