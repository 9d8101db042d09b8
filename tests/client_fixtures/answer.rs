//! Whether an answer parses as the client's own SDK would read it: an Anthropic message or
//! its event stream ending in `message_stop`, an OpenAI chat completion or its chunks ending
//! in `[DONE]`, a Responses object or its events ending in `response.completed`, a token
//! count.
use serde_json::Value;
use switchyard_mock::MockUpstream;

use super::fixture::Api;

/// What the client got back, and what the upstream refused on the way.
pub struct Reply {
    pub status: u16,
    pub route: String,
    pub ctype: String,
    pub text: String,
    /// The error bodies of the requests `mock` refused.
    pub refused: Vec<String>,
}

impl Reply {
    pub async fn read(response: reqwest::Response, mock: &MockUpstream) -> Reply {
        let status = response.status().as_u16();
        let route = super::support::route(&response);
        let ctype = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let text = response.text().await.unwrap_or_default();
        let refused = mock
            .refused()
            .into_iter()
            .filter_map(|q| q.refusal)
            .collect();
        Reply {
            status,
            route,
            ctype,
            text,
            refused,
        }
    }

    /// Status, route, the start of the body and the refusals, for a failure message.
    pub fn detail(&self) -> String {
        let cut: String = self.text.chars().take(400).collect();
        format!(
            "{} route={:?} {cut} | upstream refused: {:?}",
            self.status, self.route, self.refused
        )
    }
}

/// The SSE events of `text`: (event name, data).
pub fn events(text: &str) -> Vec<(Option<String>, String)> {
    let text = text.replace("\r\n", "\n");
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = Some(n.trim().to_string());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            (!data.is_empty()).then(|| (name, data.join("\n")))
        })
        .collect()
}

/// Checks `text` (with its content type) against what the client of `api` parses.
pub fn check(api: Api, stream: bool, ctype: &str, text: &str) -> Result<(), String> {
    if stream && !ctype.starts_with("text/event-stream") {
        return Err(format!("stream answered as {ctype}"));
    }
    if !stream && !ctype.starts_with("application/json") {
        return Err(format!("non-stream answered as {ctype}"));
    }
    match (api, stream) {
        (Api::Messages, false) => message(&json(text)?),
        (Api::Messages, true) => {
            named_events(text, "message_start", "message_delta", "message_stop")
        }
        (Api::Chat, false) => completion(&json(text)?),
        (Api::Chat, true) => chunks(text),
        (Api::Responses, false) => response(&json(text)?),
        (Api::Responses, true) => named_events(
            text,
            "response.created",
            "response.output_text.delta",
            "response.completed",
        ),
        (Api::CountTokens, _) => count(&json(text)?),
        (Api::Probe | Api::Upgrade, _) => Ok(()),
    }
}

fn json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))
}

fn message(body: &Value) -> Result<(), String> {
    let ok = body["type"] == "message"
        && body["role"] == "assistant"
        && body["content"].is_array()
        && body["stop_reason"].is_string()
        && body["usage"]["output_tokens"].is_u64();
    ok.then_some(())
        .ok_or_else(|| format!("not an Anthropic message: {body}"))
}

/// Named events whose data's `type` is the event name, none an `error`, opening with
/// `first`, closing with `last` and holding `middle`.
fn named_events(text: &str, first: &str, middle: &str, last: &str) -> Result<(), String> {
    let ev = events(text);
    for (name, data) in &ev {
        let body: Value =
            serde_json::from_str(data).map_err(|e| format!("event data not JSON ({e}): {data}"))?;
        if name.as_deref() != body["type"].as_str() || name.as_deref() == Some("error") {
            return Err(format!("event {name:?} with data {data}"));
        }
    }
    let names: Vec<&str> = ev.iter().filter_map(|(n, _)| n.as_deref()).collect();
    let ok =
        names.first() == Some(&first) && names.last() == Some(&last) && names.contains(&middle);
    ok.then_some(())
        .ok_or_else(|| format!("not a whole {first}..{last} stream: {names:?}"))
}

fn completion(body: &Value) -> Result<(), String> {
    let ok = body["object"] == "chat.completion"
        && body["choices"][0]["message"]["role"] == "assistant"
        && body["choices"][0]["finish_reason"].is_string();
    ok.then_some(())
        .ok_or_else(|| format!("not a chat completion: {body}"))
}

fn chunks(text: &str) -> Result<(), String> {
    let ev = events(text);
    let Some(((None, last), rest)) = ev.split_last() else {
        return Err(format!("empty or named events: {text}"));
    };
    if last != "[DONE]" {
        return Err(format!("does not end in [DONE]: {text}"));
    }
    let mut finished = false;
    for (name, data) in rest {
        let body: Value =
            serde_json::from_str(data).map_err(|e| format!("chunk not JSON ({e}): {data}"))?;
        if name.is_some()
            || body["object"] != "chat.completion.chunk"
            || body.get("error").is_some()
        {
            return Err(format!("not a chunk: {name:?} {data}"));
        }
        finished |= body["choices"][0]["finish_reason"].is_string();
    }
    finished
        .then_some(())
        .ok_or_else(|| format!("no finish_reason: {text}"))
}

fn response(body: &Value) -> Result<(), String> {
    let ok =
        body["object"] == "response" && body["status"] == "completed" && body["output"].is_array();
    ok.then_some(())
        .ok_or_else(|| format!("not a completed Responses object: {body}"))
}

fn count(body: &Value) -> Result<(), String> {
    body["input_tokens"]
        .as_u64()
        .filter(|n| *n > 0)
        .map(|_| ())
        .ok_or_else(|| format!("not a token count: {body}"))
}

/// The text of an answer in any of the formats (for the composition tests).
pub fn text_of(api: Api, stream: bool, body: &str) -> String {
    if !stream {
        let body: Value = serde_json::from_str(body).unwrap_or_default();
        return match api {
            Api::Messages => body["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            _ => body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        };
    }
    events(body)
        .iter()
        .filter_map(|(_, d)| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| match api {
            Api::Messages => v["delta"]["text"].as_str().map(str::to_string),
            _ => v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string),
        })
        .collect()
}
