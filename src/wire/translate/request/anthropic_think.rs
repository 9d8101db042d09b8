//! Anthropic `thinking` (`enabled` with a budget, `adaptive`, `disabled`) and
//! `output_config.effort`, mapped to what the target has: OpenAI `reasoning_effort` (the
//! effort if given, else one derived from the budget), Gemini `thinkingConfig` (the budget,
//! else the effort's budget). What the target cannot take is dropped and reported.

use serde_json::Value;

use crate::wire::translate::ir::ChatRequest;
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::request::read;
use crate::wire::translate::WireFormat;

/// What `thinking` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::wire::translate) enum Mode {
    /// `enabled` (with `budget_tokens`) or `adaptive` (no budget: Claude decides).
    On {
        budget: Option<u64>,
    },
    Off,
}

/// `thinking` and `output_config.effort`, read in any key order and applied together.
#[derive(Debug, Default)]
pub(in crate::wire::translate) struct Thinking {
    pub mode: Option<Mode>,
    pub effort: Option<String>,
}

/// `thinking: {type: enabled, budget_tokens} | {type: adaptive} | {type: disabled}`.
pub(in crate::wire::translate) fn read(value: Value, at: Path, target: WireFormat) -> Result<Mode> {
    let mut fields = read::object(value, at)?;
    let ty = read::req_str(&mut fields, "type", at)?;
    let budget = match fields.remove("budget_tokens").filter(|b| !b.is_null()) {
        Some(b) => Some(read::count(&b, at.key("budget_tokens"))?),
        None => None,
    };
    read::no_more(&fields, at, target, &[])?;
    match ty.as_str() {
        "enabled" | "adaptive" => Ok(Mode::On { budget }),
        "disabled" => Ok(Mode::Off),
        other => Err(TranslateError::unsupported(
            at.key("type"),
            format!("`{other}` is not enabled, adaptive or disabled"),
        )),
    }
}

/// OpenAI's effort for an Anthropic effort (`max` is OpenAI's `high`); `None`: unknown.
fn openai_effort(effort: &str) -> Option<&'static str> {
    match effort {
        "low" => Some("low"),
        "medium" => Some("medium"),
        "high" | "max" => Some("high"),
        _ => None,
    }
}

/// An effort for a thinking budget: up to 4096 tokens `low`, up to 16384 `medium`, more
/// `high` (between the budgets Google documents for those efforts).
pub(in crate::wire::translate) fn budget_effort(budget: u64) -> &'static str {
    match budget {
        0..=4096 => "low",
        4097..=16384 => "medium",
        _ => "high",
    }
}

/// Set the request's reasoning fields for `target`; report what it cannot take.
pub(in crate::wire::translate) fn apply(
    thinking: Thinking,
    req: &mut ChatRequest,
    target: WireFormat,
) {
    let effort = thinking.effort.as_deref().and_then(openai_effort);
    if thinking.effort.is_some() && effort.is_none() {
        req.note_dropped("output_config.effort");
    }
    let Some(Mode::On { budget }) = thinking.mode else {
        // Without thinking the effort only tunes Claude's spend.
        if effort.is_some() {
            req.note_dropped("output_config.effort");
        }
        return;
    };
    match target {
        WireFormat::Gemini => {
            req.thinking_budget = budget;
            if budget.is_none() {
                // Gemini thinks dynamically by default; an effort picks its budget.
                req.reasoning_effort = effort.map(str::to_string);
            } else if effort.is_some() {
                req.note_dropped("output_config.effort");
            }
        }
        _ => match effort.or(budget.map(budget_effort)) {
            Some(e) => req.reasoning_effort = Some(e.to_string()),
            // `adaptive` without an effort: reasoning models decide by themselves.
            None => req.note_dropped("thinking"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(mode: Option<Mode>, effort: Option<&str>, target: WireFormat) -> ChatRequest {
        let mut req = ChatRequest::default();
        let thinking = Thinking {
            mode,
            effort: effort.map(str::to_string),
        };
        apply(thinking, &mut req, target);
        req
    }

    #[test]
    fn the_effort_wins_over_the_budget_and_the_budget_gives_one() {
        let on = |b| Some(Mode::On { budget: b });
        let request = applied(on(Some(31999)), Some("low"), WireFormat::OpenAi);
        assert_eq!(request.reasoning_effort.as_deref(), Some("low"));
        let request = applied(on(Some(31999)), None, WireFormat::OpenAi);
        assert_eq!(request.reasoning_effort.as_deref(), Some("high"));
        let request = applied(on(Some(2000)), None, WireFormat::OpenAi);
        assert_eq!(request.reasoning_effort.as_deref(), Some("low"));
        let request = applied(on(None), Some("max"), WireFormat::OpenAi);
        assert_eq!(request.reasoning_effort.as_deref(), Some("high"));
        let request = applied(on(None), None, WireFormat::OpenAi);
        assert_eq!(
            (request.reasoning_effort, request.dropped),
            (None, vec!["thinking"])
        );
    }

    #[test]
    fn gemini_takes_the_budget_or_the_effort_and_off_drops_the_effort() {
        let request = applied(
            Some(Mode::On { budget: None }),
            Some("high"),
            WireFormat::Gemini,
        );
        assert_eq!(
            (request.thinking_budget, request.reasoning_effort.as_deref()),
            (None, Some("high"))
        );
        let request = applied(
            Some(Mode::On { budget: Some(5) }),
            Some("high"),
            WireFormat::Gemini,
        );
        assert_eq!(request.thinking_budget, Some(5));
        assert_eq!(request.dropped, vec!["output_config.effort"]);
        let request = applied(Some(Mode::Off), Some("high"), WireFormat::OpenAi);
        assert_eq!(request.reasoning_effort, None);
        assert_eq!(request.dropped, vec!["output_config.effort"]);
        let request = applied(None, Some("turbo"), WireFormat::OpenAi);
        assert_eq!(request.dropped, vec!["output_config.effort"]);
    }
}
