//! `Convo`: builds the neutral message list while a reader walks the client's messages —
//! neighbours with the same role are merged, for Gemini each tool result learns the name
//! of the call it answers (Gemini matches results to calls by name, not id), and the fields
//! dropped on the way are collected.

use std::collections::HashMap;

use serde_json::Value;

use crate::wire::translate::ir::{Message, Part, Role};
use crate::wire::translate::refusal::{Path, Result, TranslateError};
use crate::wire::translate::WireFormat;

pub(in crate::wire::translate) struct Convo {
    pub messages: Vec<Message>,
    /// Fields dropped while reading the messages (`ChatRequest::dropped`).
    pub dropped: Vec<&'static str>,
    target: WireFormat,
    /// Tool-call id → name, kept only for Gemini (the latest call with an id wins).
    names: HashMap<String, String>,
}

impl Convo {
    pub fn new(target: WireFormat, capacity: usize) -> Self {
        Convo {
            messages: Vec::with_capacity(capacity),
            dropped: Vec::new(),
            target,
            names: HashMap::new(),
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

    /// The upstream format the conversation is read for.
    pub fn target(&self) -> WireFormat {
        self.target
    }

    /// Record a dropped field once.
    pub fn dropped(&mut self, field: &'static str) {
        crate::wire::translate::ir::note(&mut self.dropped, field);
    }

    /// The messages and the dropped fields, into the request. A leading system message of
    /// plain text joins the system prompt (the canonical form every writer reads the same).
    pub fn finish(mut self, req: &mut crate::wire::translate::ir::ChatRequest) {
        let plain = |m: &Message| m.parts.iter().all(|p| matches!(p, Part::Text(_)));
        if self
            .messages
            .first()
            .is_some_and(|m| m.role == Role::System && plain(m))
        {
            let first = self.messages.remove(0);
            req.system
                .extend(first.parts.into_iter().filter_map(|p| match p {
                    Part::Text(t) => Some(t),
                    _ => None,
                }));
        }
        req.messages = self.messages;
        for f in self.dropped {
            req.note_dropped(f);
        }
    }

    /// Add an assistant's tool call to the current assistant turn.
    pub fn tool_call(&mut self, id: String, name: String, args: Value) {
        if self.target == WireFormat::Gemini {
            self.names.insert(id.clone(), name.clone());
        }
        self.open(Role::Assistant)
            .push(Part::ToolCall { id, name, args });
    }

    /// Add a tool result to the current user turn.
    pub fn tool_result(
        &mut self,
        id: String,
        content: Vec<Part>,
        is_error: bool,
        at: Path,
    ) -> Result<()> {
        let name = if self.target == WireFormat::Gemini {
            match self.names.get(&id) {
                Some(n) => Some(n.clone()),
                None => {
                    return Err(TranslateError::invalid(
                        at,
                        format!(
                            "`{id}` answers no tool call of an earlier assistant turn; Gemini \
                             matches tool results to calls by the call's name, so the call must \
                             be in the history"
                        ),
                    ))
                }
            }
        } else {
            None
        };
        self.open(Role::User).push(Part::ToolResult {
            id,
            name,
            content,
            is_error,
        });
        Ok(())
    }
}
