//! Token usage extraction from upstream bodies and stream events (R8.5, R11), normalised
//! across wire formats:
//!
//! | normalised | OpenAI chat / completions | OpenAI Responses | Anthropic Messages |
//! |---|---|---|---|
//! | `prompt_tokens` (all input) | `prompt_tokens` | `input_tokens` | `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` |
//! | `cached_tokens` (cache reads, part of prompt) | `prompt_tokens_details.cached_tokens` | `input_tokens_details.cached_tokens` | `cache_read_input_tokens` |
//! | `cache_write_tokens` (part of prompt) | 0 | 0 | `cache_creation_input_tokens` |
//! | `completion_tokens` | `completion_tokens` | `output_tokens` | `output_tokens` |
//!
//! OpenAI's prompt count already includes its cached tokens; Anthropic's `input_tokens`
//! excludes both cache counts, so they are added. `cached_tokens <= prompt_tokens` always.

use serde_json::Value;

use crate::wire::sse::Event;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Every input token, cache reads and writes included.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Input tokens read from the provider's prompt cache (part of `prompt_tokens`).
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache (part of `prompt_tokens`).
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn is_zero(&self) -> bool {
        self.prompt_tokens == 0 && self.completion_tokens == 0
    }

    /// Fold a `usage` object (OpenAI chat/completions/responses or Anthropic) into `self`.
    /// Later reports replace earlier ones field by field (Anthropic sends input at
    /// `message_start` and output at `message_delta`).
    pub fn absorb(&mut self, u: &Value) {
        let n = |v: &Value| v.as_u64();
        self.fold(Raw {
            prompt: n(&u["prompt_tokens"]),
            input: n(&u["input_tokens"]),
            completion: n(&u["completion_tokens"]).or_else(|| n(&u["output_tokens"])),
            cached: n(&u["prompt_tokens_details"]["cached_tokens"])
                .or_else(|| n(&u["input_tokens_details"]["cached_tokens"])),
            cache_read: n(&u["cache_read_input_tokens"]),
            cache_write: n(&u["cache_creation_input_tokens"]),
        });
    }

    /// Fold one report's raw fields in, normalising (see the module table).
    pub(crate) fn fold(&mut self, r: Raw) {
        if let Some(c) = r.completion {
            self.completion_tokens = c;
        }
        if let Some(p) = r.prompt {
            self.prompt_tokens = p;
            self.cached_tokens = r.cached.unwrap_or(0).min(p);
            self.cache_write_tokens = 0;
        } else if let Some(i) = r.input {
            if r.cache_read.is_some() || r.cache_write.is_some() {
                // Anthropic: input excludes both cache counts.
                let read = r.cache_read.unwrap_or(0);
                let write = r.cache_write.unwrap_or(0);
                self.prompt_tokens = i.saturating_add(read).saturating_add(write);
                self.cached_tokens = read;
                self.cache_write_tokens = write;
            } else {
                self.prompt_tokens = i;
                self.cached_tokens = r.cached.unwrap_or(0).min(i);
                self.cache_write_tokens = 0;
            }
        }
    }

    /// Usage from a complete non-stream body (typed reading; skips everything else).
    pub fn from_body(body: &[u8]) -> Option<Usage> {
        crate::wire::usage_scan::from_body(body)
    }

    /// Fold the usage carried by a stream event, if any.
    pub fn observe(&mut self, ev: &Event) {
        let Some(d) = ev.data.as_deref() else { return };
        if !d.contains("\"usage\"") {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(d) else {
            return;
        };
        for u in [&v["usage"], &v["message"]["usage"], &v["response"]["usage"]] {
            if u.is_object() {
                self.absorb(u);
            }
        }
    }
}

/// The usage fields of one report, as sent.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Raw {
    pub prompt: Option<u64>,
    pub input: Option<u64>,
    pub completion: Option<u64>,
    /// OpenAI `*_tokens_details.cached_tokens` (included in the prompt count).
    pub cached: Option<u64>,
    /// Anthropic `cache_read_input_tokens` (excluded from `input_tokens`).
    pub cache_read: Option<u64>,
    /// Anthropic `cache_creation_input_tokens` (excluded from `input_tokens`).
    pub cache_write: Option<u64>,
}

/// Characters per token used when usage has to be estimated (R9.8): the common rule of thumb
/// for English text and code with BPE tokenizers. Estimates are marked `usage_estimated`.
pub const CHARS_PER_TOKEN: u64 = 4;

/// Tokens for `chars` characters, rounded up.
pub fn estimate_tokens(chars: u64) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN)
}

/// Usage of a relayed stream: what upstream reported, plus the characters of content relayed,
/// so a stream that ends without its usage report (client cancel, cut) is estimated, not 0.
#[derive(Debug, Clone, Default)]
pub struct StreamUsage {
    pub reported: Usage,
    /// A final usage report (completion/output tokens) was seen.
    pub final_seen: bool,
    /// Characters of generated content relayed so far.
    pub content_chars: u64,
}

impl StreamUsage {
    pub fn observe(&mut self, ev: &Event) {
        let Some(d) = ev.data.as_deref() else { return };
        let Ok(v) = serde_json::from_str::<Value>(d) else {
            return;
        };
        for u in [&v["usage"], &v["response"]["usage"]] {
            if u.is_object() {
                self.reported.absorb(u);
                let out = &u["completion_tokens"];
                self.final_seen |= out.is_u64() || u["output_tokens"].is_u64();
            }
        }
        if v["message"]["usage"].is_object() {
            self.reported.absorb(&v["message"]["usage"]);
        }
        self.content_chars += content_chars(&v);
    }

    /// The usage to record and whether it was estimated: reported figures when the stream
    /// carried its final usage report, else completion tokens from the relayed content and
    /// prompt tokens (when unreported) from the request body size.
    pub fn settle(&self, request_bytes: usize) -> (Usage, bool) {
        if self.final_seen {
            return (self.reported, false);
        }
        let mut u = self.reported;
        if u.prompt_tokens == 0 {
            u.prompt_tokens = estimate_tokens(request_bytes as u64);
        }
        u.completion_tokens = u.completion_tokens.max(estimate_tokens(self.content_chars));
        (u, true)
    }
}

/// Characters of generated content in one parsed stream event (any dialect).
fn content_chars(v: &Value) -> u64 {
    let len = |x: &Value| x.as_str().map_or(0, |s| s.chars().count() as u64);
    let mut n = 0;
    for c in v["choices"].as_array().into_iter().flatten() {
        let d = &c["delta"];
        n += len(&d["content"]) + len(&d["reasoning_content"]) + len(&c["text"]);
        for t in d["tool_calls"].as_array().into_iter().flatten() {
            n += len(&t["function"]["name"]) + len(&t["function"]["arguments"]);
        }
    }
    let d = &v["delta"];
    n += len(&d["text"]) + len(&d["partial_json"]) + len(&d["thinking"]);
    if v["type"].as_str().is_some_and(|t| t.ends_with(".delta")) {
        n += len(d);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_and_anthropic_bodies() {
        let u = Usage::from_body(br#"{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}"#).unwrap();
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_tokens: 4,
                cache_write_tokens: 0
            }
        );
        let u = Usage::from_body(
            br#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 9,
                completion_tokens: 3,
                cached_tokens: 2,
                cache_write_tokens: 0
            }
        );
        assert!(Usage::from_body(b"{}").is_none());
    }

    fn ev(d: &str) -> Event {
        Event {
            raw: bytes::Bytes::new(),
            name: None,
            data: Some(d.into()),
            comment_only: false,
        }
    }

    #[test]
    fn stream_usage_reported_is_not_estimated() {
        let mut s = StreamUsage::default();
        s.observe(&ev(r#"{"choices":[{"delta":{"content":"hello world!"}}]}"#));
        s.observe(&ev(
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        ));
        assert_eq!(
            s.settle(1000),
            (
                Usage {
                    prompt_tokens: 3,
                    completion_tokens: 2,
                    ..Usage::default()
                },
                false
            )
        );
    }

    #[test]
    fn cut_stream_is_estimated_from_content() {
        let mut s = StreamUsage::default();
        // 12 + 5 chars of chat content, tool arguments count too.
        s.observe(&ev(r#"{"choices":[{"delta":{"content":"hello world!"}}]}"#));
        s.observe(&ev(
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"a\"}"}}]}}]}"#,
        ));
        let (u, est) = s.settle(400);
        assert!(est);
        assert_eq!(u.completion_tokens, 5); // ceil(17 / 4)
        assert_eq!(u.prompt_tokens, 100);
        // Anthropic: input reported at message_start is kept, output estimated.
        let mut s = StreamUsage::default();
        s.observe(&ev(
            r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#,
        ));
        s.observe(&ev(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"abcdefghij"}}"#));
        let (u, est) = s.settle(4000);
        assert!(est);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (9, 3));
        // Responses deltas.
        let mut s = StreamUsage::default();
        s.observe(&ev(
            r#"{"type":"response.output_text.delta","delta":"abcdefgh"}"#,
        ));
        assert_eq!(s.settle(0).0.completion_tokens, 2);
    }

    #[test]
    fn anthropic_stream_merges_start_and_delta() {
        let mut u = Usage::default();
        let ev = |d: &str| Event {
            raw: bytes::Bytes::new(),
            name: None,
            data: Some(d.into()),
            comment_only: false,
        };
        u.observe(&ev(
            r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#,
        ));
        u.observe(&ev(
            r#"{"type":"message_delta","usage":{"output_tokens":12}}"#,
        ));
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 9,
                completion_tokens: 12,
                ..Usage::default()
            }
        );
    }
}
