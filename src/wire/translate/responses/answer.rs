//! A non-stream answer as a Responses object: the upstream's answer is first read as Chat
//! Completions by `translate_answer` (hidden errors, every format's usage and stop reason),
//! then its first choice becomes the `output` items — reasoning, text, function calls, in
//! that order — and its `finish_reason` the `status`.

use serde_json::Value;

use super::super::upstream_error::UpstreamError;
use super::super::{translate_answer, AnswerOptions, TranslatedAnswer, WireFormat};
use super::output::{seed, End, Head, Item};

/// Translate a 200 answer of format `upstream` for a Responses client.
pub fn answer_from(
    upstream: WireFormat,
    body: &[u8],
    opts: &AnswerOptions,
) -> Result<TranslatedAnswer, UpstreamError> {
    let chat = translate_answer(upstream, WireFormat::OpenAi, body, opts)?;
    let completion: Value =
        serde_json::from_slice(&chat.body).map_err(|e| UpstreamError::bad_answer(upstream, e))?;
    let choice = &completion["choices"][0];
    let items = items(&choice["message"]);
    let end = End::from_finish(choice["finish_reason"].as_str());
    let seed = seed(opts.id_seed);
    let head = Head::new(
        &seed,
        opts.created,
        completion["model"].as_str().unwrap_or_default(),
    );
    let status = end.status();
    let n = items.len();
    let output = items
        .iter()
        .enumerate()
        .map(|(i, it)| it.to_json(&it.id(&seed, i), end.item_status(i, n)))
        .collect();
    let usage = chat.usage.unwrap_or_default();
    let body = head.object(status, output, Some(&usage), Some(end), None);
    Ok(TranslatedAnswer {
        body: body.to_string().into_bytes(),
        usage: chat.usage,
    })
}

/// A Chat `message` as output items.
fn items(msg: &Value) -> Vec<Item> {
    let mut out = Vec::new();
    let text_of = |k: &str| {
        msg[k]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    if let Some(text) = text_of("reasoning_content") {
        out.push(Item::Reasoning { text });
    }
    if let Some(text) = text_of("content").or_else(|| text_of("refusal")) {
        out.push(Item::Message { text });
    }
    for (n, c) in msg["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let function = &c["function"];
        let call_id = match c["id"].as_str().filter(|s| !s.is_empty()) {
            Some(id) => id.to_string(),
            None => format!("call_{n}"),
        };
        out.push(Item::Call {
            call_id,
            name: function["name"].as_str().unwrap_or_default().to_string(),
            args: function["arguments"].as_str().unwrap_or("{}").to_string(),
        });
    }
    out
}
