//! Stop reasons: Anthropic `stop_reason` ↔ OpenAI `finish_reason` ↔ Gemini `finishReason`, as
//! tables (README.md repeats them). Gemini's safety finishes are errors, not stop reasons.

use super::ir::Stop;
use super::upstream_error::{ErrorKind, UpstreamError};

/// Anthropic `stop_reason` → neutral. Unknown values end the turn normally.
pub fn from_anthropic(reason: &str) -> Stop {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => Stop::MaxTokens,
        "stop_sequence" => Stop::StopSequence,
        "tool_use" => Stop::ToolUse,
        "refusal" => Stop::ContentFilter,
        "pause_turn" => Stop::PauseTurn,
        _ => Stop::EndTurn,
    }
}

pub fn to_anthropic(stop: Stop) -> &'static str {
    match stop {
        Stop::EndTurn => "end_turn",
        Stop::MaxTokens => "max_tokens",
        Stop::StopSequence => "stop_sequence",
        Stop::ToolUse => "tool_use",
        Stop::ContentFilter => "refusal",
        Stop::PauseTurn => "pause_turn",
    }
}

/// OpenAI `finish_reason` → neutral. `stop` does not say whether a stop sequence matched.
pub fn from_openai(reason: &str) -> Stop {
    match reason {
        "length" => Stop::MaxTokens,
        "tool_calls" | "function_call" => Stop::ToolUse,
        "content_filter" => Stop::ContentFilter,
        _ => Stop::EndTurn,
    }
}

pub fn to_openai(stop: Stop) -> &'static str {
    match stop {
        Stop::EndTurn | Stop::StopSequence | Stop::PauseTurn => "stop",
        Stop::MaxTokens => "length",
        Stop::ToolUse => "tool_calls",
        Stop::ContentFilter => "content_filter",
    }
}

/// Gemini `finishReason` → neutral, or the error it stands for. `has_calls`: the candidate
/// holds function calls (Gemini says `STOP` for those).
pub fn from_gemini(reason: &str, has_calls: bool) -> Result<Stop, UpstreamError> {
    match reason {
        "MAX_TOKENS" => Ok(Stop::MaxTokens),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY"
        | "LANGUAGE" => Err(UpstreamError::new(
            400,
            ErrorKind::ContentFilter,
            format!("Gemini blocked the answer (finishReason {reason})"),
        )),
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => Err(UpstreamError::new(
            502,
            ErrorKind::Api,
            format!("Gemini produced an unusable tool call (finishReason {reason})"),
        )),
        _ if has_calls => Ok(Stop::ToolUse),
        _ => Ok(Stop::EndTurn),
    }
}

/// A prompt Gemini refused to answer (`promptFeedback.blockReason`).
pub fn gemini_block(reason: &str) -> UpstreamError {
    UpstreamError::new(
        400,
        ErrorKind::ContentFilter,
        format!("Gemini blocked the prompt (promptFeedback.blockReason {reason})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_match_the_references() {
        let pairs = [
            ("end_turn", "stop"),
            ("max_tokens", "length"),
            ("stop_sequence", "stop"),
            ("tool_use", "tool_calls"),
            ("refusal", "content_filter"),
            ("pause_turn", "stop"),
        ];
        for (a, o) in pairs {
            assert_eq!(to_openai(from_anthropic(a)), o, "{a}");
        }
        let back = [
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("tool_calls", "tool_use"),
            ("function_call", "tool_use"),
            ("content_filter", "refusal"),
        ];
        for (o, a) in back {
            assert_eq!(to_anthropic(from_openai(o)), a, "{o}");
        }
        assert_eq!(from_gemini("STOP", false), Ok(Stop::EndTurn));
        assert_eq!(from_gemini("STOP", true), Ok(Stop::ToolUse));
        assert_eq!(from_gemini("MAX_TOKENS", true), Ok(Stop::MaxTokens));
        assert_eq!(
            from_gemini("SAFETY", false).unwrap_err().kind,
            ErrorKind::ContentFilter
        );
        assert_eq!(
            from_gemini("MALFORMED_FUNCTION_CALL", false)
                .unwrap_err()
                .status,
            502
        );
    }
}
