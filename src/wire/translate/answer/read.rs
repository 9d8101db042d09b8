//! Reading non-stream upstream answers (Anthropic message, OpenAI `chat.completion`, Gemini
//! `GenerateContentResponse`) into the neutral `Answer`; a 200 that is only an error object,
//! a Gemini prompt block or a safety finish becomes an `UpstreamError`.

use serde_json::Value;

use crate::wire::translate::ids::IdGen;
use crate::wire::translate::ir::{Answer, AnswerPart, Choice, Stop};
use crate::wire::translate::shapes::{AMessage, GCandidate, GResponse, OChoice, OCompletion};
use crate::wire::translate::upstream_error::UpstreamError;
use crate::wire::translate::{stop, WireFormat};

/// Anthropic message → neutral answer.
pub(in crate::wire::translate) fn anthropic(body: &[u8]) -> Result<Answer, UpstreamError> {
    let message: AMessage = parse(WireFormat::Anthropic, body)?;
    if message.ty.as_deref() == Some("error")
        || (message.error.is_some() && message.content.is_empty())
    {
        return Err(hidden(WireFormat::Anthropic, body));
    }
    let mut parts = Vec::with_capacity(message.content.len());
    for b in message.content {
        parts.push(match b.ty.as_ref() {
            "text" => AnswerPart::Text(b.text.unwrap_or_default().into_owned()),
            "thinking" => AnswerPart::Thinking {
                text: b.thinking.unwrap_or_default().into_owned(),
                signature: b.signature.unwrap_or_default().into_owned(),
            },
            "redacted_thinking" => {
                AnswerPart::RedactedThinking(b.data.unwrap_or_default().into_owned())
            }
            "tool_use" => AnswerPart::ToolCall {
                id: b.id.unwrap_or_default().into_owned(),
                name: b.name.unwrap_or_default().into_owned(),
                args: b
                    .input
                    .map_or_else(|| "{}".to_string(), |r| r.get().to_string()),
            },
            other => {
                return Err(UpstreamError::bad_answer(
                    WireFormat::Anthropic,
                    format!("a `{other}` content block has no counterpart"),
                ))
            }
        });
    }
    Ok(Answer {
        id: message.id.unwrap_or_default().into_owned(),
        model: message.model.unwrap_or_default().into_owned(),
        choices: vec![Choice {
            parts,
            stop: stop::from_anthropic(message.stop_reason.as_deref().unwrap_or("end_turn")),
            stop_sequence: message.stop_sequence.map(|s| s.into_owned()),
        }],
        usage: message.usage.map(|u| u.usage()),
    })
}

/// OpenAI `chat.completion` → neutral answer.
pub(in crate::wire::translate) fn openai(body: &[u8]) -> Result<Answer, UpstreamError> {
    let completion: OCompletion = parse(WireFormat::OpenAi, body)?;
    if completion.error.is_some() && completion.choices.is_empty() {
        return Err(hidden(WireFormat::OpenAi, body));
    }
    if completion.choices.is_empty() {
        return Err(UpstreamError::bad_answer(
            WireFormat::OpenAi,
            "the answer has no choices",
        ));
    }
    let mut choices: Vec<(u64, Choice)> = completion
        .choices
        .into_iter()
        .enumerate()
        .map(|(i, ch)| (ch.index.unwrap_or(i as u64), openai_choice(ch)))
        .collect();
    choices.sort_by_key(|(i, _)| *i);
    Ok(Answer {
        id: completion.id.unwrap_or_default().into_owned(),
        model: completion.model.unwrap_or_default().into_owned(),
        choices: choices.into_iter().map(|(_, ch)| ch).collect(),
        usage: completion.usage.map(|u| u.usage()),
    })
}

fn openai_choice(ch: OChoice) -> Choice {
    let mut parts = Vec::new();
    let mut stop = stop::from_openai(ch.finish_reason.as_deref().unwrap_or("stop"));
    if let Some(m) = ch.message {
        if let Some(r) = m
            .reasoning_content
            .or(m.reasoning)
            .filter(|r| !r.is_empty())
        {
            parts.push(AnswerPart::Thinking {
                text: r.into_owned(),
                signature: String::new(),
            });
        }
        let has_calls = !m.tool_calls.is_empty();
        if let Some(t) = m.content.filter(|t| !(t.is_empty() && has_calls)) {
            parts.push(AnswerPart::Text(t.into_owned()));
        }
        if let Some(r) = m.refusal {
            parts.push(AnswerPart::Text(r.into_owned()));
            stop = Stop::ContentFilter;
        }
        // Servers that say `stop` after tool calls (vLLM, Ollama) mean `tool_calls`.
        if has_calls && stop == Stop::EndTurn {
            stop = Stop::ToolUse;
        }
        for call in m.tool_calls {
            let function = call.function;
            let (name, args) =
                function.map_or((None, None), |function| (function.name, function.arguments));
            parts.push(AnswerPart::ToolCall {
                id: call.id.unwrap_or_default().into_owned(),
                name: name.unwrap_or_default().into_owned(),
                args: args.unwrap_or_default().into_owned(),
            });
        }
    }
    Choice {
        parts,
        stop,
        stop_sequence: None,
    }
}

/// Gemini `GenerateContentResponse` → neutral answer.
pub(in crate::wire::translate) fn gemini(
    body: &[u8],
    ids: &IdGen,
) -> Result<Answer, UpstreamError> {
    let response: GResponse = parse(WireFormat::Gemini, body)?;
    if response.error.is_some() && response.candidates.is_empty() {
        return Err(hidden(WireFormat::Gemini, body));
    }
    if let Some(reason) = response
        .prompt_feedback
        .as_ref()
        .and_then(|f| f.block_reason.as_deref())
    {
        return Err(stop::gemini_block(reason));
    }
    if response.candidates.is_empty() {
        return Err(UpstreamError::bad_answer(
            WireFormat::Gemini,
            "the answer has no candidates",
        ));
    }
    let mut choices = Vec::with_capacity(response.candidates.len());
    let mut calls = 0;
    for cand in response.candidates {
        choices.push(gemini_choice(cand, &mut calls, ids)?);
    }
    Ok(Answer {
        id: response.response_id.unwrap_or_default().into_owned(),
        model: response.model_version.unwrap_or_default().into_owned(),
        choices,
        usage: response.usage_metadata.map(|u| u.usage()),
    })
}

fn gemini_choice(
    cand: GCandidate,
    calls: &mut usize,
    ids: &IdGen,
) -> Result<Choice, UpstreamError> {
    let mut parts = Vec::new();
    for p in cand.content.map(|c| c.parts).unwrap_or_default() {
        if let Some(kind) = p.foreign_kind() {
            return Err(UpstreamError::bad_answer(
                WireFormat::Gemini,
                format!("a `{kind}` part has no counterpart in a chat answer"),
            ));
        }
        if let Some(f) = p.function_call {
            let id = f.id.map(|i| i.into_owned()).unwrap_or_default();
            let sig = p.thought_signature.as_deref().unwrap_or("");
            parts.push(AnswerPart::ToolCall {
                id: ids.call_id(&id, sig, *calls),
                name: f.name.unwrap_or_default().into_owned(),
                args: f
                    .args
                    .map_or_else(|| "{}".to_string(), |a| a.get().to_string()),
            });
            *calls += 1;
        } else if let Some(t) = p.text {
            parts.push(match p.thought {
                Some(true) => AnswerPart::Thinking {
                    text: t.into_owned(),
                    signature: String::new(),
                },
                _ => AnswerPart::Text(t.into_owned()),
            });
        }
    }
    let has_calls = parts
        .iter()
        .any(|p| matches!(p, AnswerPart::ToolCall { .. }));
    let stop = stop::from_gemini(cand.finish_reason.as_deref().unwrap_or("STOP"), has_calls)?;
    Ok(Choice {
        parts,
        stop,
        stop_sequence: None,
    })
}

fn parse<'a, T: serde::Deserialize<'a>>(
    from: WireFormat,
    body: &'a [u8],
) -> Result<T, UpstreamError> {
    serde_json::from_slice(body).map_err(|e| UpstreamError::bad_answer(from, e))
}

/// A 200 whose body is an error object (R9.5): its embedded status (a status code, or an
/// Anthropic error type), else 502.
fn hidden(from: WireFormat, body: &[u8]) -> UpstreamError {
    let parsed: Value = serde_json::from_slice(body).unwrap_or_default();
    let error = UpstreamError::from_value(from, 0, &parsed);
    let typed = from == WireFormat::Anthropic
        && error
            .code
            .as_deref()
            .is_some_and(crate::wire::translate::upstream_error::is_anthropic_type);
    if typed || crate::wire::translate::upstream_error::has_embedded_status(&parsed) {
        error
    } else {
        UpstreamError::from_value(from, 502, &parsed)
    }
}
