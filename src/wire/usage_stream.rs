//! Usage of a relayed stream (R8.5, R9.8, R11): what the upstream reported in its events,
//! folded by the one usage reader, plus the characters of content relayed, so a stream that
//! ends without its usage report (client cancel, cut) is estimated rather than counted 0.

use serde_json::Value;

use super::sse::Event;
use super::usage::Usage;

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
        let peek = ev.peek();
        if !peek.usage && !peek.nested_usage {
            // No usage report: the first look has all this event adds.
            self.content_chars += peek.content_chars;
            return;
        }
        // A usage report: read typed from the data (no tree), unless the data is one the
        // typed reading declines (a repeated key), which the tree reads as before. The
        // first look's content characters are the tree's (`peek_tests`).
        if let Some(data) = ev.data.as_deref() {
            if let Some(final_seen) = self.reported.absorb_event(data) {
                self.final_seen |= final_seen;
                self.content_chars += peek.content_chars;
                return;
            }
        }
        self.observe_tree(ev);
    }

    /// `observe` from the event's parsed tree: events the typed reading declines, and the
    /// reference it is tested against.
    pub(crate) fn observe_tree(&mut self, ev: &Event) {
        let Some(v) = ev.json() else { return };
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
        self.content_chars += content_chars(v);
    }

    /// The usage to record and whether it was estimated: reported figures when the stream
    /// carried its final usage report, else completion tokens from the relayed content and
    /// prompt tokens (when unreported) from the request body size.
    /// A report of zero output tokens for a stream that relayed content is no report: an
    /// upstream that ignores `include_usage` leaves the translated stream's usage at zero
    /// (R16.5), and a fabricated zero is never billed.
    pub fn settle(&self, request_bytes: usize) -> (Usage, bool) {
        let zero_with_content = self.reported.completion_tokens == 0 && self.content_chars > 0;
        if self.final_seen && !zero_with_content {
            return (self.reported, false);
        }
        let mut usage = self.reported;
        if usage.prompt_tokens == 0 {
            usage.prompt_tokens = estimate_tokens(request_bytes as u64);
        }
        usage.completion_tokens = usage
            .completion_tokens
            .max(estimate_tokens(self.content_chars));
        (usage, true)
    }
}

/// Characters of generated content in one parsed stream event (any dialect).
pub(crate) fn content_chars(value: &Value) -> u64 {
    let len = |x: &Value| x.as_str().map_or(0, |s| s.chars().count() as u64);
    let mut chars = 0;
    for c in value["choices"].as_array().into_iter().flatten() {
        let delta = &c["delta"];
        chars += len(&delta["content"]) + len(&delta["reasoning_content"]) + len(&c["text"]);
        for t in delta["tool_calls"].as_array().into_iter().flatten() {
            chars += len(&t["function"]["name"]) + len(&t["function"]["arguments"]);
        }
    }
    let delta = &value["delta"];
    chars += len(&delta["text"]) + len(&delta["partial_json"]) + len(&delta["thinking"]);
    if value["type"]
        .as_str()
        .is_some_and(|t| t.ends_with(".delta"))
    {
        chars += len(delta);
    }
    chars
}
