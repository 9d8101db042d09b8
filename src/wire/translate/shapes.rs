//! Typed, borrowing views of what upstreams send (non-stream answers and stream events) in the
//! three formats. Each event is parsed once into these; text stays borrowed from the event
//! unless it had escapes. Unknown fields are skipped; `null` lists read as empty.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::usage::{AnthropicUsage, GeminiUsage, OpenAiUsage};

type Str<'a> = Option<Cow<'a, str>>;

/// `null` where a list is expected reads as an empty list.
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

// ---- Anthropic Messages -------------------------------------------------------------------

/// A Messages answer, or `message_start.message`.
#[derive(Debug, Deserialize)]
pub(crate) struct AMessage<'a> {
    #[serde(borrow, default, rename = "type")]
    pub ty: Str<'a>,
    #[serde(borrow, default)]
    pub id: Str<'a>,
    #[serde(borrow, default)]
    pub model: Str<'a>,
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub content: Vec<ABlock<'a>>,
    #[serde(borrow, default)]
    pub stop_reason: Str<'a>,
    #[serde(borrow, default)]
    pub stop_sequence: Str<'a>,
    #[serde(default)]
    pub usage: Option<AnthropicUsage>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// A content block of an answer or of `content_block_start`.
#[derive(Debug, Deserialize)]
pub(crate) struct ABlock<'a> {
    #[serde(borrow, rename = "type")]
    pub ty: Cow<'a, str>,
    #[serde(borrow, default)]
    pub text: Str<'a>,
    #[serde(borrow, default)]
    pub thinking: Str<'a>,
    #[serde(borrow, default)]
    pub signature: Str<'a>,
    /// `redacted_thinking.data`.
    #[serde(borrow, default)]
    pub data: Str<'a>,
    #[serde(borrow, default)]
    pub id: Str<'a>,
    #[serde(borrow, default)]
    pub name: Str<'a>,
    #[serde(borrow, default)]
    pub input: Option<&'a RawValue>,
}

/// One Messages stream event (the `type` in the data names it).
#[derive(Debug, Deserialize)]
pub(crate) struct AEvent<'a> {
    #[serde(borrow, rename = "type")]
    pub ty: Cow<'a, str>,
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub content_block: Option<ABlock<'a>>,
    #[serde(borrow, default)]
    pub delta: Option<ADelta<'a>>,
    #[serde(borrow, default)]
    pub message: Option<AMessage<'a>>,
    #[serde(default)]
    pub usage: Option<AnthropicUsage>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// `content_block_delta.delta` and `message_delta.delta`.
#[derive(Debug, Deserialize)]
pub(crate) struct ADelta<'a> {
    #[serde(borrow, default, rename = "type")]
    pub ty: Str<'a>,
    #[serde(borrow, default)]
    pub text: Str<'a>,
    #[serde(borrow, default)]
    pub partial_json: Str<'a>,
    #[serde(borrow, default)]
    pub thinking: Str<'a>,
    #[serde(borrow, default)]
    pub stop_reason: Str<'a>,
    #[serde(borrow, default)]
    pub stop_sequence: Str<'a>,
}

// ---- OpenAI Chat Completions --------------------------------------------------------------

/// A `chat.completion` answer or a `chat.completion.chunk`.
#[derive(Debug, Deserialize)]
pub(crate) struct OCompletion<'a> {
    #[serde(borrow, default)]
    pub id: Str<'a>,
    #[serde(borrow, default)]
    pub model: Str<'a>,
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub choices: Vec<OChoice<'a>>,
    #[serde(default)]
    pub usage: Option<OpenAiUsage>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct OChoice<'a> {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub message: Option<OMessage<'a>>,
    #[serde(borrow, default)]
    pub delta: Option<OMessage<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Str<'a>,
}

/// `choices[].message` or `choices[].delta`.
#[derive(Debug, Deserialize)]
pub(crate) struct OMessage<'a> {
    #[serde(borrow, default)]
    pub content: Str<'a>,
    /// The de-facto reasoning field of OpenAI-compatible servers (DeepSeek, vLLM).
    #[serde(borrow, default)]
    pub reasoning_content: Str<'a>,
    /// The same, as some servers (OpenRouter, Ollama) name it.
    #[serde(borrow, default)]
    pub reasoning: Str<'a>,
    #[serde(borrow, default)]
    pub refusal: Str<'a>,
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub tool_calls: Vec<OToolCall<'a>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct OToolCall<'a> {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub id: Str<'a>,
    #[serde(borrow, default)]
    pub function: Option<OFunction<'a>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct OFunction<'a> {
    #[serde(borrow, default)]
    pub name: Str<'a>,
    #[serde(borrow, default)]
    pub arguments: Str<'a>,
}

// ---- Gemini -------------------------------------------------------------------------------

/// A `GenerateContentResponse` (the answer, and each stream event).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GResponse<'a> {
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub candidates: Vec<GCandidate<'a>>,
    #[serde(borrow, default)]
    pub prompt_feedback: Option<GFeedback<'a>>,
    #[serde(default)]
    pub usage_metadata: Option<GeminiUsage>,
    #[serde(borrow, default)]
    pub model_version: Str<'a>,
    #[serde(borrow, default)]
    pub response_id: Str<'a>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GCandidate<'a> {
    #[serde(borrow, default)]
    pub content: Option<GContent<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Str<'a>,
    #[serde(default)]
    pub index: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GContent<'a> {
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub parts: Vec<GPart<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GPart<'a> {
    #[serde(borrow, default)]
    pub text: Str<'a>,
    #[serde(default)]
    pub thought: Option<bool>,
    #[serde(borrow, default)]
    pub thought_signature: Str<'a>,
    #[serde(borrow, default)]
    pub function_call: Option<GFunctionCall<'a>>,
    /// Parts no chat client format can carry (generated images, code execution, ...).
    #[serde(default)]
    pub inline_data: Option<IgnoredAny>,
    #[serde(default)]
    pub file_data: Option<IgnoredAny>,
    #[serde(default)]
    pub executable_code: Option<IgnoredAny>,
    #[serde(default)]
    pub code_execution_result: Option<IgnoredAny>,
}

impl GPart<'_> {
    /// The name of a part kind no client format can carry.
    pub fn foreign_kind(&self) -> Option<&'static str> {
        [
            (self.inline_data.is_some(), "inlineData"),
            (self.file_data.is_some(), "fileData"),
            (self.executable_code.is_some(), "executableCode"),
            (self.code_execution_result.is_some(), "codeExecutionResult"),
        ]
        .into_iter()
        .find_map(|(present, name)| present.then_some(name))
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct GFunctionCall<'a> {
    #[serde(borrow, default)]
    pub id: Str<'a>,
    #[serde(borrow, default)]
    pub name: Str<'a>,
    #[serde(borrow, default)]
    pub args: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GFeedback<'a> {
    #[serde(borrow, default)]
    pub block_reason: Str<'a>,
}
