//! Request validation as the real providers do it (PROVIDERS.md): what OpenAI Chat
//! Completions and Responses, Anthropic Messages, Gemini and OpenAI-compatible servers refuse,
//! with their own status and error body, per [`Flavour`].
//!
//! Validation runs before the scripted behaviour renders an answer, so a test passes only
//! when the gateway sent what the provider would accept. Infrastructure faults (`status=`,
//! `hang=`, `redirect=`) come first, as a provider's front end answers them before the API
//! reads the body.
pub(crate) mod anthropic;
pub(crate) mod gemini;
pub(crate) mod openai;

use std::fmt;
use std::str::FromStr;

use http::HeaderMap;
use serde_json::{Map, Value};

use super::request::Endpoint;

/// Which provider the mock plays, for validation and answer details.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavour {
    /// Every endpoint as its own provider: OpenAI Chat Completions and Responses (Azure
    /// deployment paths too), Anthropic Messages and token counting, Gemini.
    #[default]
    Native,
    /// An OpenAI-compatible chat-only server (vLLM, DeepSeek): Chat Completions only, with
    /// the servers' extra fields; `/v1/responses`, `/v1/messages` and Gemini paths answer
    /// `404 {"detail":"Not Found"}`; `max_tokens` is accepted on every model.
    ChatOnly,
    /// DeepSeek serving a thinking model (thinking on unless `thinking: {type: disabled}`):
    /// chat-only, refuses an assistant `tool_calls` turn after the last user message that
    /// does not carry its `reasoning_content` back, and answers with `reasoning_content`.
    DeepseekThinking,
}

impl Flavour {
    /// Whether only Chat Completions is served.
    pub(crate) fn chat_only(self) -> bool {
        self != Flavour::Native
    }
}

impl fmt::Display for Flavour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flavour::Native => "native",
            Flavour::ChatOnly => "chat-only",
            Flavour::DeepseekThinking => "deepseek-thinking",
        })
    }
}

impl FromStr for Flavour {
    type Err = String;

    /// `native`, `chat-only` or `deepseek-thinking`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "native" => Ok(Flavour::Native),
            "chat-only" => Ok(Flavour::ChatOnly),
            "deepseek-thinking" => Ok(Flavour::DeepseekThinking),
            other => Err(format!(
                "unknown mock flavour {other:?} (native | chat-only | deepseek-thinking)"
            )),
        }
    }
}

/// A refused request: the status and body the provider answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: u16,
    pub body: String,
}

impl Refusal {
    /// An OpenAI error object.
    pub(crate) fn openai(msg: &str, param: Option<&str>, code: Option<&str>) -> Refusal {
        let v = serde_json::json!({"error": {"message": msg, "type": "invalid_request_error",
            "param": param, "code": code}});
        Refusal {
            status: 400,
            body: v.to_string(),
        }
    }

    /// An Anthropic `invalid_request_error`.
    pub(crate) fn anthropic(msg: &str) -> Refusal {
        Refusal {
            status: 400,
            body: super::json::anthropic_error("invalid_request_error", msg),
        }
    }

    /// A Gemini `INVALID_ARGUMENT`.
    pub(crate) fn gemini(msg: &str) -> Refusal {
        let v = serde_json::json!({"error": {"code": 400, "message": msg, "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"description": msg}]}]}});
        Refusal {
            status: 400,
            body: v.to_string(),
        }
    }

    /// The 404 of a server that does not have the path (FastAPI's answer, vLLM and DeepSeek).
    fn not_found() -> Refusal {
        Refusal {
            status: 404,
            body: r#"{"detail":"Not Found"}"#.to_string(),
        }
    }
}

/// What one request is validated against.
pub(crate) struct Target<'a> {
    pub flavour: Flavour,
    pub ep: Endpoint,
    pub headers: &'a HeaderMap,
    /// The model named by the path (an Azure deployment, a Gemini model), if any.
    pub path_model: Option<&'a str>,
}

/// Checks `body` as the provider of `t` does; `Err` is the provider's refusal.
pub(crate) fn check(t: &Target<'_>, body: &[u8]) -> Result<(), Refusal> {
    if t.flavour.chat_only()
        && matches!(
            t.ep,
            Endpoint::Responses
                | Endpoint::Messages
                | Endpoint::CountTokens
                | Endpoint::Gemini { .. }
        )
    {
        return Err(Refusal::not_found());
    }
    match t.ep {
        Endpoint::Chat => openai::chat(t, &parse(body, Format::OpenAi)?),
        Endpoint::Responses => openai::responses(&parse(body, Format::OpenAi)?),
        Endpoint::Messages => anthropic::messages(t.headers, &parse(body, Format::Anthropic)?),
        Endpoint::CountTokens => {
            anthropic::count_tokens(t.headers, &parse(body, Format::Anthropic)?)
        }
        Endpoint::Gemini { .. } => gemini::generate(&parse(body, Format::Gemini)?),
        _ => Ok(()),
    }
}

#[derive(Clone, Copy)]
enum Format {
    OpenAi,
    Anthropic,
    Gemini,
}

/// The body as a JSON object, or the provider's answer to one that is not.
fn parse(body: &[u8], f: Format) -> Result<Map<String, Value>, Refusal> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(match f {
            Format::OpenAi => Refusal::openai(
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
                None,
                None,
            ),
            Format::Anthropic => Refusal::anthropic(
                "There was an issue with the formatting or the content of your request body: expected a JSON object",
            ),
            Format::Gemini => Refusal::gemini("Invalid JSON payload received. Expected an object."),
        }),
    }
}

/// The first key of `m` not in `known`.
pub(crate) fn unknown_key<'a>(m: &'a Map<String, Value>, known: &[&str]) -> Option<&'a str> {
    m.keys().map(String::as_str).find(|k| !known.contains(k))
}
