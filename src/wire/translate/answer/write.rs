//! Writing the neutral answer as an OpenAI `chat.completion` or an Anthropic message: content,
//! reasoning (`reasoning_content` ↔ thinking blocks), tool calls with their ids, the stop
//! reason and usage.

use serde_json::{json, Map, Value};

use crate::wire::translate::ids::IdGen;
use crate::wire::translate::ir::{Answer, AnswerPart, Choice, Stop};
use crate::wire::translate::stop;
use crate::wire::translate::upstream_error::UpstreamError;
use crate::wire::translate::usage::Usage;
use crate::wire::translate::WireFormat;

/// `chat.completion`; tool-call arguments that are not JSON are passed as they came.
pub(in crate::wire::translate) fn openai(answer: Answer, created: u64, ids: &IdGen) -> Value {
    let mut calls = 0;
    let choices: Vec<Value> = answer
        .choices
        .into_iter()
        .enumerate()
        .map(|(i, ch)| openai_choice(i, ch, ids, &mut calls))
        .collect();
    let mut out = json!({
        "id": ids.message_id(&answer.id),
        "object": "chat.completion",
        "created": created,
        "model": answer.model,
        "choices": choices,
    });
    if let Some(u) = answer.usage {
        out["usage"] = u.to_openai();
    }
    out
}

fn openai_choice(i: usize, ch: Choice, ids: &IdGen, calls: &mut usize) -> Value {
    let mut text: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let mut tool_calls = Vec::new();
    // Text blocks with another block between them are joined with a blank line, as the
    // request direction joins them; neighbours are one text split for its citations.
    let mut gap = false;
    for p in ch.parts {
        if !matches!(p, AnswerPart::Text(_)) {
            gap = true;
        }
        match p {
            AnswerPart::Text(t) => {
                let joined = text.get_or_insert_with(String::new);
                if std::mem::take(&mut gap) && !joined.is_empty() && !t.is_empty() {
                    joined.push_str(crate::wire::translate::request::to_openai::TEXT_JOINER);
                }
                joined.push_str(&t);
            }
            AnswerPart::Thinking { text: t, .. } => {
                reasoning.get_or_insert_with(String::new).push_str(&t)
            }
            // Encrypted reasoning: nothing a client of this format can read.
            AnswerPart::RedactedThinking(_) => {}
            AnswerPart::ToolCall { id, name, args } => {
                let id = ids.client_id(&id, *calls);
                *calls += 1;
                tool_calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }));
            }
        }
    }
    let mut msg = Map::new();
    msg.insert("role".into(), "assistant".into());
    msg.insert("content".into(), text.map_or(Value::Null, Value::from));
    if let Some(r) = reasoning {
        msg.insert("reasoning_content".into(), r.into());
    }
    if !tool_calls.is_empty() {
        msg.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    json!({
        "index": i,
        "message": msg,
        "finish_reason": stop::to_openai(ch.stop),
        "logprobs": null,
    })
}

/// An Anthropic message from the first choice (Anthropic clients cannot ask for more).
pub(in crate::wire::translate) fn anthropic(
    answer: Answer,
    ids: &IdGen,
    from: WireFormat,
) -> Result<Value, UpstreamError> {
    let id = ids.message_id(&answer.id);
    let usage = answer.usage.unwrap_or_default();
    let Some(ch) = answer.choices.into_iter().next() else {
        return Err(UpstreamError::bad_answer(from, "the answer has no choices"));
    };
    let mut content = Vec::with_capacity(ch.parts.len());
    let mut calls = 0;
    for p in ch.parts {
        content.push(anthropic_block(p, ids, &mut calls, from)?);
    }
    Ok(json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": content,
        "stop_reason": stop::to_anthropic(ch.stop),
        "stop_sequence": ch.stop_sequence.filter(|_| ch.stop == Stop::StopSequence),
        "usage": Usage::to_anthropic(&usage),
    }))
}

fn anthropic_block(
    p: AnswerPart,
    ids: &IdGen,
    calls: &mut usize,
    from: WireFormat,
) -> Result<Value, UpstreamError> {
    Ok(match p {
        AnswerPart::Text(t) => json!({"type": "text", "text": t}),
        AnswerPart::Thinking { text, signature } => {
            json!({"type": "thinking", "thinking": text, "signature": signature})
        }
        AnswerPart::RedactedThinking(data) => json!({"type": "redacted_thinking", "data": data}),
        AnswerPart::ToolCall { id, name, args } => {
            let input = tool_input(&args, from)?;
            let id = ids.client_id(&id, *calls);
            *calls += 1;
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
    })
}

/// Tool arguments as the object Anthropic's `input` must be. An upstream that produced
/// arguments that are not a JSON object gave an answer this format cannot carry.
fn tool_input(args: &str, from: WireFormat) -> Result<Value, UpstreamError> {
    if args.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(UpstreamError::bad_answer(
            from,
            "tool call arguments are not a JSON object",
        )),
    }
}
