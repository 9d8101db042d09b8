//! Reading an OpenAI Chat Completions request into the neutral form: every top-level field is
//! mapped, dropped and reported (`DROPPED`, `ChatRequest::dropped`) or refused with its path.
//! Messages: `req_openai_msgs`.

use serde_json::{Map, Value};

use crate::wire::translate::ir::{ChatRequest, ResponseFormat, Tool, ToolChoice};
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::request::read::{self, refuse};
use crate::wire::translate::WireFormat;

/// Fields that change nothing a translated upstream could honour: dropped and reported
/// (README.md says why for each).
const DROPPED: &[(&str, &str)] = &[
    ("metadata", "metadata"),
    ("store", "store"),
    ("service_tier", "service_tier"),
    ("prompt_cache_key", "prompt_cache_key"),
    ("prediction", "prediction"),
    ("verbosity", "verbosity"),
];

pub(in crate::wire::translate) fn read(value: Value, target: WireFormat) -> Result<ChatRequest> {
    let mut map = read::object(value, Path::ROOT)?;
    let mut req = ChatRequest::default();
    let mut messages = None;
    let (mut max_tokens, mut max_completion) = (None, None);
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
            "max_tokens" => max_tokens = Some(read::count(&value, at)?),
            "max_completion_tokens" => max_completion = Some(read::count(&value, at)?),
            "stream" => req.stream = read::boolean(&value, at)?,
            "stream_options" => stream_options(value, at, &mut req, target)?,
            "stop" => req.stop = stop(value, at, target)?,
            "tools" => req.tools = tools(value, at, target, &mut req.dropped)?,
            "tool_choice" => req.tool_choice = Some(tool_choice(value, at, target)?),
            "parallel_tool_calls" => parallel(&value, at, &mut req, target)?,
            "response_format" => {
                req.response_format = response_format(value, at, target, &mut req.dropped)?
            }
            "user" | "safety_identifier" => {
                let user_id = read::string(value, at)?;
                // `user` wins over `safety_identifier` whatever the key order.
                if k == "user" || req.user.is_none() {
                    req.user = Some(user_id);
                }
            }
            _ => sampling(&k, value, at, &mut req, target)?,
        }
    }
    req.max_tokens = max_completion.or(max_tokens);
    if req.n.is_some() && req.stream {
        // A Gemini stream interleaves candidates; the translated stream carries one choice.
        return Err(TranslateError::unsupported(
            "n",
            "more than one choice in a stream cannot be translated from Gemini; send `n: 1` \
             or `stream: false`",
        ));
    }
    let messages = messages.ok_or_else(|| TranslateError::invalid("messages", "is required"))?;
    crate::wire::translate::request::from_openai_msgs::read(messages, &mut req, target)?;
    Ok(req)
}

/// Sampling and output-shape fields, each mapped or refused per target.
fn sampling(
    k: &str,
    value: Value,
    at: Path,
    req: &mut ChatRequest,
    target: WireFormat,
) -> Result<()> {
    let gemini = target == WireFormat::Gemini;
    match k {
        "temperature" => {
            let temperature_value = read::number(&value, at)?;
            if target == WireFormat::Anthropic && temperature_value > 1.0 {
                return Err(TranslateError::unsupported(
                    at,
                    format!("is {temperature_value}; Anthropic Messages accepts 0 to 1"),
                ));
            }
            req.temperature = Some(temperature_value);
        }
        "top_p" => req.top_p = Some(read::number(&value, at)?),
        "n" => match read::count(&value, at)? {
            1 => {}
            n if gemini => req.n = Some(n),
            _ => return Err(refuse(at, target, "more than one choice (`n` > 1)")),
        },
        "seed" if gemini => req.seed = Some(read::integer(&value, at)?),
        // Best-effort determinism only, in OpenAI too: dropped.
        "seed" => {
            read::integer(&value, at)?;
            req.note_dropped("seed");
        }
        "presence_penalty" | "frequency_penalty" => {
            let penalty = read::number(&value, at)?;
            match (penalty == 0.0, gemini, k) {
                (true, _, _) => {}
                (false, true, "presence_penalty") => req.presence_penalty = Some(penalty),
                (false, true, _) => req.frequency_penalty = Some(penalty),
                (false, false, _) => return Err(refuse(at, target, "a non-zero penalty")),
            }
        }
        "logprobs" => {
            if read::boolean(&value, at)? {
                return Err(refuse(at, target, "`logprobs: true`"));
            }
        }
        "top_logprobs" => return Err(refuse(at, target, "`top_logprobs`")),
        "logit_bias" => {
            if !value.as_object().is_some_and(Map::is_empty) {
                return Err(refuse(at, target, "`logit_bias`"));
            }
        }
        "reasoning_effort" => reasoning_effort(value, at, req, target)?,
        "modalities" => {
            let only_text = value
                .as_array()
                .is_some_and(|a| a.iter().all(|m| m == "text"));
            if !only_text {
                return Err(refuse(at, target, "an output modality other than text"));
            }
        }
        "audio" => return Err(refuse(at, target, "audio output")),
        "web_search_options" => return Err(refuse(at, target, "OpenAI's web search")),
        "functions" | "function_call" => {
            return Err(TranslateError::unsupported(
                at,
                "is the deprecated function-calling API; send `tools` and `tool_choice`",
            ))
        }
        _ => return Err(read::unknown(at, target)),
    }
    Ok(())
}

/// `reasoning_effort`: a Gemini thinking budget; towards Anthropic dropped (its thinking needs
/// a budget below `max_tokens` and fixes the temperature: README.md).
fn reasoning_effort(
    value: Value,
    at: Path,
    req: &mut ChatRequest,
    target: WireFormat,
) -> Result<()> {
    let effort = read::string(value, at)?;
    if target != WireFormat::Gemini {
        req.note_dropped("reasoning_effort");
        return Ok(());
    }
    if crate::wire::translate::request::to_gemini::effort_budget(&effort).is_none() {
        return Err(TranslateError::unsupported(
            at,
            format!(
                "`{effort}` has no Gemini thinking budget; use none, minimal, low, medium or high"
            ),
        ));
    }
    req.reasoning_effort = Some(effort);
    Ok(())
}

fn stream_options(value: Value, at: Path, req: &mut ChatRequest, target: WireFormat) -> Result<()> {
    let mut options = read::object(value, at)?;
    if let Some(u) = options.remove("include_usage").filter(|u| !u.is_null()) {
        req.include_usage = read::boolean(&u, at.key("include_usage"))?;
    }
    let obfuscation = [("include_obfuscation", "stream_options.include_obfuscation")];
    read::drop_keys(&mut options, &obfuscation, &mut req.dropped);
    read::no_more(&options, at, target, &[])
}

fn stop(value: Value, at: Path, target: WireFormat) -> Result<Vec<String>> {
    let stops = match value {
        Value::String(s) => vec![s],
        Value::Array(a) => a
            .into_iter()
            .enumerate()
            .map(|(i, s)| read::string(s, at.idx(i)))
            .collect::<Result<_>>()?,
        other => {
            return Err(TranslateError::invalid(
                at,
                format!(
                    "must be a string or an array of strings, not {}",
                    read::kind(&other)
                ),
            ))
        }
    };
    if target == WireFormat::Gemini && stops.len() > 5 {
        return Err(TranslateError::unsupported(
            at,
            "has more than 5 sequences; Gemini accepts at most 5",
        ));
    }
    Ok(stops)
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
        let ty = read::opt_str(&mut tool, "type", pi)?;
        if ty.as_deref().is_some_and(|t| t != "function") {
            return Err(refuse(
                pi.key("type"),
                target,
                "a tool that is not a function",
            ));
        }
        let pf = pi.key("function");
        let mut function = read::object(tool.remove("function").unwrap_or(Value::Null), pf)?;
        read::no_more(&tool, pi, target, &[])?;
        let name = read::req_str(&mut function, "name", pf)?;
        let description = read::opt_str(&mut function, "description", pf)?;
        let schema = function.remove("parameters").filter(|s| !s.is_null());
        // `strict` asks OpenAI to enforce the schema; the others follow it without a
        // guarantee (README.md: dropped).
        read::drop_keys(&mut function, &[("strict", "tools[].strict")], dropped);
        read::no_more(&function, pf, target, &[])?;
        out.push(Tool {
            name,
            description,
            schema,
        });
    }
    Ok(out)
}

fn tool_choice(value: Value, at: Path, target: WireFormat) -> Result<ToolChoice> {
    match value {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            _ => Err(TranslateError::invalid(
                at,
                format!("`{s}` is not auto, none or required"),
            )),
        },
        other => {
            let mut choice = read::object(other, at)?;
            let ty = read::opt_str(&mut choice, "type", at)?;
            if ty.as_deref() != Some("function") {
                return Err(refuse(
                    at.key("type"),
                    target,
                    "a tool choice other than a function",
                ));
            }
            let pf = at.key("function");
            let mut function = read::object(choice.remove("function").unwrap_or(Value::Null), pf)?;
            Ok(ToolChoice::Named(read::req_str(&mut function, "name", pf)?))
        }
    }
}

fn parallel(value: &Value, at: Path, req: &mut ChatRequest, target: WireFormat) -> Result<()> {
    let allowed = read::boolean(value, at)?;
    if !allowed && target == WireFormat::Gemini {
        return Err(refuse(at, target, "`parallel_tool_calls: false`"));
    }
    req.parallel_tool_calls = Some(allowed);
    Ok(())
}

fn response_format(
    value: Value,
    at: Path,
    target: WireFormat,
    dropped: &mut Vec<&'static str>,
) -> Result<Option<ResponseFormat>> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    let rf = match ty.as_str() {
        "text" => return Ok(None),
        "json_object" => ResponseFormat::JsonObject,
        "json_schema" => {
            let pj = at.key("json_schema");
            let mut json_schema =
                read::object(fields.remove("json_schema").unwrap_or(Value::Null), pj)?;
            let name = read::req_str(&mut json_schema, "name", pj)?;
            let schema = json_schema
                .remove("schema")
                .filter(|s| !s.is_null())
                .unwrap_or_else(|| serde_json::json!({}));
            let strict = match json_schema.remove("strict") {
                Some(s) if !s.is_null() => Some(read::boolean(&s, pj.key("strict"))?),
                _ => None,
            };
            let description = [("description", "response_format.json_schema.description")];
            read::drop_keys(&mut json_schema, &description, dropped);
            read::no_more(&json_schema, pj, target, &[])?;
            ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            }
        }
        _ => {
            return Err(TranslateError::invalid(
                at.key("type"),
                format!("`{ty}` is not text, json_object or json_schema"),
            ))
        }
    };
    if target == WireFormat::Anthropic && rf == ResponseFormat::JsonObject {
        return Err(TranslateError::unsupported(
            at.key("type"),
            "`json_object` cannot be expressed in Anthropic Messages, which constrains JSON \
             only by a schema: send `json_schema`",
        ));
    }
    Ok(Some(rf))
}
