//! Token usage, format-neutral, and its reading/writing in each format. Anthropic's
//! `input_tokens` excludes cache reads and writes; OpenAI's `prompt_tokens` includes
//! `prompt_tokens_details.cached_tokens`; Gemini's `promptTokenCount` includes
//! `cachedContentTokenCount` and its `candidatesTokenCount` excludes `thoughtsTokenCount`.

use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

/// Usage in one convention, every count a total of its kind: the gateway's one usage type
/// (`wire::usage::Usage`); this file reads and writes it in each format.
pub use crate::wire::usage::Usage;

impl Usage {
    /// OpenAI Chat Completions `usage`.
    pub fn to_openai(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        })
    }

    /// Anthropic Messages `usage` (`input_tokens` without the cache counts).
    pub fn to_anthropic(&self) -> Value {
        json!({
            "input_tokens": self.uncached_input(),
            "cache_creation_input_tokens": self.cache_write_tokens,
            "cache_read_input_tokens": self.cached_tokens,
            "output_tokens": self.completion_tokens,
        })
    }

    /// Input tokens neither read from nor written to a cache.
    pub fn uncached_input(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cached_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

/// A count that may be missing, `null`, negative or not a number: only a non-negative
/// integer counts. Upstream usage oddities never fail an answer.
pub(crate) fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(d)?.as_u64())
}

/// Anthropic `usage` (answers, `message_start`, `message_delta`): later reports replace
/// earlier ones field by field.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct AnthropicUsage {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub cache_read_input_tokens: Option<u64>,
}

impl AnthropicUsage {
    pub fn absorb(&mut self, usage: &AnthropicUsage) {
        let pick = |new: Option<u64>, old: Option<u64>| new.or(old);
        self.input_tokens = pick(usage.input_tokens, self.input_tokens);
        self.output_tokens = pick(usage.output_tokens, self.output_tokens);
        self.cache_creation_input_tokens = pick(
            usage.cache_creation_input_tokens,
            self.cache_creation_input_tokens,
        );
        self.cache_read_input_tokens =
            pick(usage.cache_read_input_tokens, self.cache_read_input_tokens);
    }

    pub fn usage(&self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let creation = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: self.input_tokens.unwrap_or(0) + read + creation,
            cached_tokens: read,
            cache_write_tokens: creation,
            completion_tokens: self.output_tokens.unwrap_or(0),
            reasoning_tokens: 0,
        }
    }
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct OpenAiUsage {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub reasoning_tokens: Option<u64>,
}

impl OpenAiUsage {
    pub fn usage(&self) -> Usage {
        let cached = self
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            cached_tokens: cached,
            cache_write_tokens: 0,
            completion_tokens: self.completion_tokens.unwrap_or(0),
            reasoning_tokens: self
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GeminiUsage {
    #[serde(default, deserialize_with = "lenient_u64")]
    pub prompt_token_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub candidates_token_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub cached_content_token_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub thoughts_token_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    pub tool_use_prompt_token_count: Option<u64>,
}

impl GeminiUsage {
    pub fn usage(&self) -> Usage {
        let thoughts = self.thoughts_token_count.unwrap_or(0);
        Usage {
            prompt_tokens: self.prompt_token_count.unwrap_or(0)
                + self.tool_use_prompt_token_count.unwrap_or(0),
            cached_tokens: self.cached_content_token_count.unwrap_or(0),
            cache_write_tokens: 0,
            completion_tokens: self.candidates_token_count.unwrap_or(0) + thoughts,
            reasoning_tokens: thoughts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_input_excludes_cache_and_openai_includes_it() {
        let anthropic: AnthropicUsage = serde_json::from_str(
            r#"{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":5}"#,
        )
        .unwrap();
        let usage = anthropic.usage();
        assert_eq!(usage.prompt_tokens, 60);
        let openai = usage.to_openai();
        assert_eq!(openai["prompt_tokens"], 60);
        assert_eq!(openai["prompt_tokens_details"]["cached_tokens"], 30);
        assert_eq!(openai["total_tokens"], 65);
        let back = usage.to_anthropic();
        assert_eq!(back["input_tokens"], 10);
        assert_eq!(back["cache_creation_input_tokens"], 20);
        assert_eq!(back["cache_read_input_tokens"], 30);
    }

    #[test]
    fn openai_cached_tokens_come_out_of_anthropic_input() {
        let openai: OpenAiUsage = serde_json::from_str(
            r#"{"prompt_tokens":100,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":12}}"#,
        )
        .unwrap();
        let anthropic = openai.usage().to_anthropic();
        assert_eq!(anthropic["input_tokens"], 36);
        assert_eq!(anthropic["cache_read_input_tokens"], 64);
        assert_eq!(anthropic["output_tokens"], 40);
        assert_eq!(openai.usage().reasoning_tokens, 12);
    }

    #[test]
    fn gemini_output_adds_thoughts_and_input_includes_cache() {
        let gemini: GeminiUsage = serde_json::from_str(
            r#"{"promptTokenCount":50,"candidatesTokenCount":7,"cachedContentTokenCount":32,"thoughtsTokenCount":20,"totalTokenCount":77}"#,
        )
        .unwrap();
        let usage = gemini.usage();
        assert_eq!((usage.prompt_tokens, usage.cached_tokens), (50, 32));
        assert_eq!((usage.completion_tokens, usage.reasoning_tokens), (27, 20));
        assert_eq!(usage.to_anthropic()["input_tokens"], 18);
    }

    #[test]
    fn odd_counts_are_ignored_not_fatal() {
        let anthropic: AnthropicUsage = serde_json::from_str(
            r#"{"input_tokens":-3,"output_tokens":"7","cache_read_input_tokens":null}"#,
        )
        .unwrap();
        assert_eq!(anthropic.usage(), Usage::default());
    }
}
