//! The `reasoning_content` a DeepSeek-like thinking server adds to its chat answers
//! ([`super::Flavour::DeepseekThinking`]): on the assistant message of a whole answer, and
//! as a first delta of a stream, before any content or tool call.
use bytes::Bytes;
use serde_json::Value;

use super::handler::Payload;
use super::json::{self, CREATED};
use super::request::ReqInfo;

/// The reasoning text of every thinking answer.
pub const THOUGHT: &str = "MOCK-THOUGHT";

/// `payload` (a chat answer, whole or streamed) with its reasoning.
pub(crate) fn add(payload: Payload, info: &ReqInfo<'_>) -> Payload {
    match payload {
        Payload::Full(bytes, ctype) => {
            let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
                return Payload::Full(bytes, ctype);
            };
            if let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) {
                for c in choices {
                    if let Some(Value::Object(m)) = c.get_mut("message") {
                        m.insert("reasoning_content".into(), THOUGHT.into());
                    }
                }
            }
            Payload::Full(Bytes::from(v.to_string()), ctype)
        }
        Payload::Sse(mut parts) => {
            let chunk = format!(
                "data: {{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":{CREATED},\"model\":{},\"choices\":[{{\"index\":0,\"delta\":{{\"reasoning_content\":\"{THOUGHT}\"}},\"finish_reason\":null}}]}}\n\n",
                json::quote(info.model())
            );
            parts.chunks.insert(0, Bytes::from(chunk));
            Payload::Sse(parts)
        }
    }
}
