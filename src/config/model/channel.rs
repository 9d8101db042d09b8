//! The validated, typed configuration of one channel (an upstream endpoint): its kind, base
//! URL, keys, models and the per-channel settings the request path reads.

use std::collections::BTreeMap;
use std::time::Duration;

use http::HeaderName;

use crate::config::model::Resilience;
use crate::secret::Secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// OpenAI and every OpenAI-compatible API (DeepSeek, vLLM, Ollama, Groq, ...).
    OpenAi,
    Anthropic,
    /// Azure OpenAI: the OpenAI wire format on deployment paths, `api-key` auth.
    Azure,
    /// Google Gemini's native `generateContent` API: always translated.
    Gemini,
}

impl ChannelKind {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::OpenAi => "openai",
            ChannelKind::Anthropic => "anthropic",
            ChannelKind::Azure => "azure",
            ChannelKind::Gemini => "gemini",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamPolicy {
    /// "" — the client decides.
    Passthrough,
    ForceStream,
    ForceNonStream,
}

impl StreamPolicy {
    /// As written in the config (`""` for pass-through).
    pub fn as_str(self) -> &'static str {
        match self {
            StreamPolicy::Passthrough => "",
            StreamPolicy::ForceStream => "force_stream",
            StreamPolicy::ForceNonStream => "force_non_stream",
        }
    }
}

/// An upstream base URL split once at load time: `https://api.x.com/v1` →
/// scheme "https", authority "api.x.com", path prefix "/v1" (no trailing slash).
#[derive(Debug, Clone)]
pub struct BaseUrl {
    pub scheme: http::uri::Scheme,
    pub authority: http::uri::Authority,
    pub path_prefix: String,
}

#[derive(Debug, Clone)]
pub struct Channel {
    pub name: String,
    pub kind: ChannelKind,
    pub base_url: BaseUrl,
    pub keys: Vec<Secret>,
    /// Public model names served: `models` plus the keys of `model_mapping`, deduplicated, sorted.
    pub models: Vec<String>,
    pub model_mapping: BTreeMap<String, String>,
    /// Extra `/v1/*` paths served as pass-through (each starts with `/v1/`).
    pub paths: Vec<String>,
    pub groups: Vec<String>,
    pub priority: i64,
    pub weight: u32,
    pub enabled: bool,
    pub auto_ban: bool,
    pub status_code_mapping: BTreeMap<u16, u16>,
    pub stream_policy: StreamPolicy,
    /// Zero = `timeouts.non_stream`.
    pub non_stream_timeout: Duration,
    /// Extra upstream headers; values are secrets (Azure `api-key`, custom auth) and are
    /// scrubbed from relayed error bodies like `keys`.
    pub headers: Vec<(HeaderName, Secret)>,
    /// Forward the client's `OpenAI-Organization` / `OpenAI-Project` headers (default false:
    /// a client cannot pick an organization or project of the operator's account).
    pub forward_organization: bool,
    /// Send a W3C `traceparent` upstream (R20.1; `channels.*.traceparent`, default true).
    /// false: the client's `traceparent`/`tracestate` are not forwarded either.
    pub traceparent: bool,
    /// Effective: global resilience overlaid with this channel's block (R2.2).
    pub resilience: Resilience,
    /// HTTP version spoken to the upstream.
    pub protocol: UpstreamProtocol,
    /// Add `stream_options.include_usage` to streaming chat requests (OpenAI kinds).
    pub include_usage: bool,
    /// Each key's published limits (R15.3); all zero = unlimited.
    pub limits: crate::config::model::KeyLimits,
    /// `api_version` (azure: the `api-version` query value; required there, "" elsewhere).
    pub api_version: String,
    /// May serve the other client wire format, translated (R16.1; default true). A `gemini`
    /// channel with `translate: false` serves no client.
    pub translate: bool,
    /// The output limit field sent to an OpenAI-format upstream, translated requests too.
    pub max_tokens_field: MaxTokensChoice,
    /// How thinking in a conversation's history reaches an OpenAI-format upstream.
    pub reasoning_history: ReasoningChoice,
    /// `timeouts.stream_stall` for this channel (zero = the global value).
    pub stream_stall: Duration,
    /// Accepts a trailing assistant turn (a prefill), for stream resume; `None` = by kind.
    pub prefill: Option<bool>,
    /// How `/v1/responses` is served (R16.4; default `auto`).
    pub responses: ResponsesMode,
}

/// `channels.*.max_tokens_field`: `auto` chooses by kind and model family
/// (`relay::translated::max_tokens_field`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensChoice {
    Auto,
    MaxTokens,
    MaxCompletionTokens,
}

/// `channels.*.reasoning_history`: `auto` chooses by upstream model (models that require
/// their reasoning back, such as DeepSeek's thinking mode, get `reasoning_content`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningChoice {
    Auto,
    ReasoningContent,
    Drop,
}

/// `channels.*.responses`: how the channel serves the Responses API (`POST /v1/responses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponsesMode {
    /// `auto`: `openai` and `azure` channels forward it as it is (they serve it, or say 404);
    /// `anthropic` and `gemini` channels translate it (with `translate: true`).
    Auto,
    /// `native`: forwarded as it is (`openai` and `azure` kinds only).
    Native,
    /// `chat`: translated to Chat Completions (`openai` and `azure` kinds: a server without
    /// `/v1/responses`, such as DeepSeek or vLLM).
    Chat,
    /// `none`: the channel does not serve `/v1/responses`.
    Off,
}

impl ResponsesMode {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponsesMode::Auto => "auto",
            ResponsesMode::Native => "native",
            ResponsesMode::Chat => "chat",
            ResponsesMode::Off => "none",
        }
    }
}

/// `channels.*.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// HTTP/1.1, a pooled connection per concurrent request.
    Http1,
    /// HTTP/2: several connections per host, each with a stream cap.
    Http2,
}

impl Channel {
    /// Every secret of the channel: its keys and its header values (R14.4).
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        self.keys
            .iter()
            .chain(self.headers.iter().map(|(_, value)| value))
    }
}
