//! `Convo`: builds the neutral message list while a reader walks the client's messages —
//! neighbours with the same role are merged, and each tool result learns the name of the call
//! it answers (Gemini matches results to calls by name).

use super::error::{Path, Result, TranslateError};
use super::ir::{Message, Part, Role};
use super::Format;

pub(super) struct Convo {
    pub messages: Vec<Message>,
    target: Format,
}

impl Convo {
    pub fn new(target: Format, capacity: usize) -> Self {
        Convo {
            messages: Vec::with_capacity(capacity),
            target,
        }
    }

    /// Continue the last message if it has `role`, else start one.
    pub fn open(&mut self, role: Role) -> &mut Vec<Part> {
        if self.messages.last().is_none_or(|m| m.role != role) {
            self.messages.push(Message {
                role,
                parts: Vec::new(),
            });
        }
        let last = self.messages.len() - 1;
        &mut self.messages[last].parts
    }

    /// The name of the tool call `id`, searched from the latest assistant turn backwards.
    pub fn call_name(&self, id: &str) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| m.parts.iter())
            .find_map(|part| match part {
                Part::ToolCall { id: i, name, .. } if i == id => Some(name.clone()),
                _ => None,
            })
    }

    /// Add a tool result to the current user turn.
    pub fn tool_result(
        &mut self,
        id: String,
        content: Vec<Part>,
        is_error: bool,
        p: Path,
    ) -> Result<()> {
        let name = self.call_name(&id);
        if name.is_none() && self.target == Format::Gemini {
            return Err(TranslateError::invalid(
                p,
                format!(
                    "`{id}` answers no tool call of an earlier assistant turn; Gemini matches \
                     tool results to calls by the call's name, so the call must be in the history"
                ),
            ));
        }
        self.open(Role::User).push(Part::ToolResult {
            id,
            name,
            content,
            is_error,
        });
        Ok(())
    }
}
