//! Token usage extraction from upstream bodies and stream events (R8.5, R11).

use serde_json::Value;

use super::sse::Event;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
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
        if let Some(p) = n(&u["prompt_tokens"]).or_else(|| n(&u["input_tokens"])) {
            self.prompt_tokens = p;
        }
        if let Some(c) = n(&u["completion_tokens"]).or_else(|| n(&u["output_tokens"])) {
            self.completion_tokens = c;
        }
        let cached = n(&u["prompt_tokens_details"]["cached_tokens"])
            .or_else(|| n(&u["input_tokens_details"]["cached_tokens"]))
            .or_else(|| n(&u["cache_read_input_tokens"]));
        if let Some(c) = cached {
            self.cached_tokens = c;
        }
    }

    /// Usage from a complete non-stream body.
    pub fn from_body(body: &[u8]) -> Option<Usage> {
        let v: Value = serde_json::from_slice(body).ok()?;
        let u = if v["usage"].is_object() {
            &v["usage"]
        } else {
            &v["response"]["usage"]
        };
        if !u.is_object() {
            return None;
        }
        let mut out = Usage::default();
        out.absorb(u);
        Some(out)
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
                cached_tokens: 4
            }
        );
        let u = Usage::from_body(
            br#"{"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}"#,
        )
        .unwrap();
        assert_eq!(
            u,
            Usage {
                prompt_tokens: 7,
                completion_tokens: 3,
                cached_tokens: 2
            }
        );
        assert!(Usage::from_body(b"{}").is_none());
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
                cached_tokens: 0
            }
        );
    }
}
