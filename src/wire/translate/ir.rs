//! The neutral request representation every client format is read into and every upstream
//! format is written from. It holds only what at least two formats can express; anything
//! else is refused, or dropped and reported in `ChatRequest::dropped`, while reading.

use serde_json::Value;

/// One chat request, format-neutral. `system` is the leading system prompt, `messages` strictly
/// alternate in the sense that two neighbours never share a role (readers merge them); a
/// `Role::System` message is a system message at its place in the conversation (written in
/// place for OpenAI, appended to the system prompt in order for the others: `hoist_system`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    /// `Some(false)`: at most one tool call per turn (`parallel_tool_calls: false`,
    /// `disable_parallel_tool_use: true`).
    pub parallel_tool_calls: Option<bool>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub stop: Vec<String>,
    pub stream: bool,
    /// The client asked for a usage report at the end of its stream.
    pub include_usage: bool,
    pub response_format: Option<ResponseFormat>,
    /// End-user id: OpenAI `user`, Anthropic `metadata.user_id`.
    pub user: Option<String>,
    /// Anthropic `thinking: {type: enabled, budget_tokens}`.
    pub thinking_budget: Option<u64>,
    /// OpenAI `reasoning_effort`.
    pub reasoning_effort: Option<String>,
    /// Number of answers (only > 1 is stored).
    pub n: Option<u64>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// Fields of the client's request dropped because the target cannot express them and
    /// their absence does not change the answer (stable names, deduplicated: `note_dropped`).
    pub dropped: Vec<&'static str>,
}

impl ChatRequest {
    /// Record a dropped field once.
    pub fn note_dropped(&mut self, field: &'static str) {
        note(&mut self.dropped, field);
    }

    /// Take the `Role::System` messages out of the conversation (their parts, in order) and
    /// merge the neighbours that now share a role: for targets with one system prompt.
    pub fn hoist_system(&mut self) -> Vec<Part> {
        let mut system = Vec::new();
        let mut kept: Vec<Message> = Vec::with_capacity(self.messages.len());
        for m in std::mem::take(&mut self.messages) {
            match (m.role, kept.last_mut()) {
                (Role::System, _) => system.extend(m.parts),
                (role, Some(last)) if last.role == role => last.parts.extend(m.parts),
                _ => kept.push(m),
            }
        }
        self.messages = kept;
        system
    }
}

/// Push `field` onto `list` unless it is there already.
pub fn note(list: &mut Vec<&'static str>, field: &'static str) {
    // Every name reported is a label the metrics export from start-up.
    debug_assert!(
        cfg!(test) || super::DROPPABLE_FIELDS.contains(&field),
        "{field} is not in DROPPABLE_FIELDS"
    );
    if !list.contains(&field) {
        list.push(field);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// A system message inside the conversation (text and cache marks only).
    System,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Image(Image),
    /// An assistant's tool call; `args` is always a JSON object.
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
    /// A user turn's tool result; `name` is the called tool's name when the call is in the
    /// history (Gemini needs it: it matches results by name, not id).
    ToolResult {
        id: String,
        name: Option<String>,
        content: Vec<Part>,
        is_error: bool,
    },
    /// An assistant's reasoning of an earlier turn (Anthropic `thinking` text, OpenAI
    /// `reasoning_content`); written back only where the upstream wants it
    /// (`ReasoningHistory`).
    Thinking(String),
    /// Anthropic `cache_control` for the part just before it (read only for an Anthropic
    /// target; the others cache implicitly).
    CacheControl(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Image {
    Url(String),
    Base64 { media_type: String, data: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments (an object schema).
    pub schema: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    /// Some tool must be called (OpenAI `required`, Anthropic `any`, Gemini `ANY`).
    Required,
    Named(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Any JSON object (OpenAI `json_object`).
    JsonObject,
    JsonSchema {
        name: String,
        schema: Value,
        strict: Option<bool>,
    },
}

/// Why generation stopped, format-neutral.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    EndTurn,
    MaxTokens,
    StopSequence,
    ToolUse,
    /// Refused or filtered (Anthropic `refusal`, OpenAI `content_filter`).
    ContentFilter,
    /// Anthropic `pause_turn` (a long server-tool turn paused).
    PauseTurn,
}

/// One non-stream answer, format-neutral.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    pub id: String,
    pub model: String,
    pub choices: Vec<Choice>,
    pub usage: Option<super::usage::Usage>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub parts: Vec<AnswerPart>,
    pub stop: Stop,
    pub stop_sequence: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AnswerPart {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    RedactedThinking(String),
    /// `args` is the arguments' JSON text.
    ToolCall {
        id: String,
        name: String,
        args: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: Role, t: &str) -> Message {
        Message {
            role,
            parts: vec![Part::Text(t.into())],
        }
    }

    #[test]
    fn hoisting_system_messages_keeps_their_order_and_merges_the_neighbours() {
        let mut req = ChatRequest {
            messages: vec![
                msg(Role::User, "a"),
                msg(Role::System, "s1"),
                msg(Role::User, "b"),
                msg(Role::Assistant, "c"),
                msg(Role::System, "s2"),
            ],
            ..ChatRequest::default()
        };
        let sys = req.hoist_system();
        assert_eq!(sys, vec![Part::Text("s1".into()), Part::Text("s2".into())]);
        let users = vec![Part::Text("a".into()), Part::Text("b".into())];
        assert_eq!(req.messages.len(), 2);
        assert_eq!(
            (req.messages[0].role, &req.messages[0].parts),
            (Role::User, &users)
        );
        assert_eq!(req.messages[1], msg(Role::Assistant, "c"));
        req.note_dropped("x");
        req.note_dropped("x");
        assert_eq!(req.dropped, ["x"]);
    }
}
