//! Compatibility rewrites of a request sent in the client's own format (no translation): what
//! a real client sends that the channel's provider refuses, where a fix cannot change the
//! answer (B-native-compat). Each rewrite is guarded by a byte search, so a request that does not
//! need it is never parsed again.
//!
//! - Towards an Anthropic channel, `thinking` blocks without a signature in the history
//!   (written for the client by another upstream through a translation: `signature: ""`)
//!   are dropped: Anthropic refuses them, and a signature cannot be made up.
//! - Towards an OpenAI-format channel whose output-limit field is `max_completion_tokens`
//!   (`channels.*.max_tokens_field`), a client's `max_tokens` is renamed: OpenAI's
//!   reasoning models refuse `max_tokens`.

use bytes::Bytes;
use serde::de::{Deserializer, IgnoredAny};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::wire::json;
use crate::wire::request::{MaxTokensKey, Peek};

use crate::config::model::{Channel, ChannelKind, MaxTokensChoice};
use crate::routing::family::PathFamily;
use crate::wire::translate::MaxTokensField;

/// The body to send on `ch` for a request of `family` in the client's own format.
pub fn native_body(family: PathFamily, ch: &Channel, model: &str, body: Bytes) -> Bytes {
    match (family, ch.kind) {
        (PathFamily::Messages, ChannelKind::Anthropic) if has_unsigned_thinking(&body) => {
            edit(body, drop_unsigned_thinking)
        }
        (PathFamily::Chat, ChannelKind::OpenAi | ChannelKind::Azure)
            if memchr::memmem::find(&body, b"\"max_tokens\"").is_some()
                && max_tokens_field(ch, model) == MaxTokensField::MaxCompletionTokens =>
        {
            match renamed_in_place(&body) {
                Some(renamed) => renamed,
                None => edit(body, rename_max_tokens),
            }
        }
        _ => body,
    }
}

/// The output-limit field a Chat Completions request sent natively on `ch` must carry:
/// `max_completion_tokens` where [`native_body`] would rename a `max_tokens`, else
/// `max_tokens`.
pub fn chat_output_field(ch: &Channel, model: &str) -> &'static str {
    match ch.kind {
        ChannelKind::OpenAi | ChannelKind::Azure
            if max_tokens_field(ch, model) == MaxTokensField::MaxCompletionTokens =>
        {
            "max_completion_tokens"
        }
        _ => "max_tokens",
    }
}

fn has_unsigned_thinking(b: &[u8]) -> bool {
    memchr::memmem::find(b, b"\"signature\":\"\"").is_some()
        || memchr::memmem::find(b, b"\"signature\": \"\"").is_some()
        || (memchr::memmem::find(b, b"\"type\":\"thinking\"").is_some()
            && memchr::memmem::find(b, b"\"signature\"").is_none())
}

/// The top-level members [`renamed_in_place`] reads: `max_tokens`'s value (null included)
/// and whether `max_completion_tokens` is there at all.
#[derive(Deserialize)]
struct OutputLimits<'a> {
    #[serde(borrow, default, deserialize_with = "json::raw_or_null")]
    max_tokens: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    max_completion_tokens: bool,
}

fn present<'de, D: Deserializer<'de>>(de: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(de).map(|_| true)
}

/// [`rename_max_tokens`] without a tree: the key `"max_tokens"` replaced in the bytes, every
/// other byte kept, after one borrowed pass. `None` when the body needs the tree reading
/// (not an object, a repeated key, an escaped key), or has nothing to rename — then the
/// tree reading decides, as before.
fn renamed_in_place(body: &Bytes) -> Option<Bytes> {
    let limits: OutputLimits = serde_json::from_slice(body).ok()?;
    if limits.max_completion_tokens {
        return None;
    }
    let (start, _) = json::span_of(body, limits.max_tokens?);
    let key = json::key_before(body, start, "max_tokens")?;
    Some(json::splice(body, key, RENAMED_KEY))
}

/// The key a client's `max_tokens` is renamed to, as written into the body.
pub const RENAMED_KEY: &[u8] = b"\"max_completion_tokens\"";

/// The span of the client's top-level `max_tokens` key when a request of `family` sent
/// natively on `ch` must have it renamed — [`native_body`]'s rename, placed by the request's
/// one parse (`peek`), so it is a splice with no parse of its own. `Ok(None)`: nothing to
/// rename. `Err(())`: [`native_body`] decides — another family or channel kind (its other
/// rewrites), a key the parse could not place, or a `max_tokens` that is not a number and
/// so gave no limit (the estimate's bound is then added under the channel's field, and
/// renaming it too would repeat that key).
pub fn max_tokens_rename(
    family: PathFamily,
    peek: &Peek,
    ch: &Channel,
    model: &str,
) -> Result<Option<(usize, usize)>, ()> {
    if family != PathFamily::Chat || !matches!(ch.kind, ChannelKind::OpenAi | ChannelKind::Azure) {
        return Err(());
    }
    match peek.max_tokens_key {
        MaxTokensKey::Absent => Ok(None),
        MaxTokensKey::Unplaced => Err(()),
        MaxTokensKey::At(_) if peek.completion_hint.is_none() => Err(()),
        MaxTokensKey::At(span) => {
            Ok((chat_output_field(ch, model) == "max_completion_tokens").then_some(span))
        }
    }
}

/// Parse, apply `f`, and write back only if `f` changed something (else the original bytes).
fn edit(body: Bytes, f: fn(&mut Value) -> bool) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    if !f(&mut v) {
        return body;
    }
    serde_json::to_vec(&v).map_or(body, Bytes::from)
}

/// Remove `thinking` blocks whose `signature` is absent or empty from assistant turns.
fn drop_unsigned_thinking(v: &mut Value) -> bool {
    let mut changed = false;
    let Some(messages) = v.get_mut("messages").and_then(Value::as_array_mut) else {
        return false;
    };
    for m in messages.iter_mut().filter(|m| m["role"] == "assistant") {
        if let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) {
            let before = blocks.len();
            blocks.retain(|b| {
                b["type"] != "thinking" || b["signature"].as_str().is_some_and(|s| !s.is_empty())
            });
            changed |= blocks.len() != before;
        }
    }
    changed
}

/// `max_tokens` → `max_completion_tokens` at the top level (unless both are given).
fn rename_max_tokens(v: &mut Value) -> bool {
    let Some(o) = v.as_object_mut() else {
        return false;
    };
    if o.contains_key("max_completion_tokens") {
        return false;
    }
    match o.remove("max_tokens") {
        Some(n) => {
            o.insert("max_completion_tokens".into(), n);
            true
        }
        None => false,
    }
}

/// `channels.*.max_tokens_field` (B-max-tokens-field): the output limit field an OpenAI-format upstream
/// takes. `auto`: `max_completion_tokens` for Azure, OpenAI's own API and OpenAI's model
/// families (its reasoning models refuse `max_tokens`); `max_tokens` for every other
/// OpenAI-compatible server (DeepSeek, vLLM, Ollama... — some do not know the newer field).
pub fn max_tokens_field(ch: &Channel, model: &str) -> MaxTokensField {
    match ch.max_tokens_field {
        MaxTokensChoice::MaxTokens => MaxTokensField::MaxTokens,
        MaxTokensChoice::MaxCompletionTokens => MaxTokensField::MaxCompletionTokens,
        MaxTokensChoice::Auto => {
            let openai_family = crate::wire::translate::openai_reasoning_model(model)
                || ["gpt-4o", "gpt-4.1", "gpt-5", "chatgpt-"]
                    .iter()
                    .any(|p| crate::wire::translate::starts_with_ignore_case(model, p));
            let openai_host = ch.base_url.authority.host().ends_with("openai.com");
            if ch.kind == ChannelKind::Azure || openai_host || openai_family {
                MaxTokensField::MaxCompletionTokens
            } else {
                MaxTokensField::MaxTokens
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Model families are matched without case and without a lowercased copy, exactly as a
    /// lowercased comparison would (the reference below).
    #[test]
    fn model_families_are_matched_without_case() {
        use crate::wire::translate::{openai_reasoning_model, starts_with_ignore_case};
        fn reference(model: &str) -> bool {
            let name = model.to_ascii_lowercase();
            let name = name.rsplit('/').next().unwrap_or(&name);
            (["o1", "o3", "o4"].iter().any(|p| name.starts_with(p)) || name.starts_with("gpt-5"))
                && !name.contains("-chat")
        }
        let models = [
            "o1",
            "O3-mini",
            "o4-mini-2025-04-16",
            "GPT-5",
            "openai/gpt-5.1",
            "Azure/O1-Preview",
            "gpt-5-chat-latest",
            "GPT-5-CHAT",
            "openai/gpt-5-Chat-x",
            "gpt-4o",
            "deepseek-chat",
            "",
            "o",
            "/",
            "o1/",
            "gpt-5/x",
            "x/GPT-5-cHaT",
            "é-o1",
            "o1-é-chat",
        ];
        for m in models {
            assert_eq!(openai_reasoning_model(m), reference(m), "{m}");
        }
        assert!(starts_with_ignore_case("ChatGPT-4o", "chatgpt-"));
        assert!(!starts_with_ignore_case("gpt", "gpt-4o"));
        assert!(!starts_with_ignore_case("é", "e"));
    }

    #[test]
    fn unsigned_thinking_is_dropped_and_signed_thinking_kept() {
        let mut v = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "signature": "", "thinking": "from a translated upstream"},
                {"type": "thinking", "thinking": "no signature at all"},
                {"type": "thinking", "thinking": "real", "signature": "EqoBCkYIBRgC"},
                {"type": "tool_use", "id": "call_1", "name": "Bash", "input": {}}]},
        ]});
        assert!(drop_unsigned_thinking(&mut v));
        let blocks = v["messages"][1]["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0]["signature"], "EqoBCkYIBRgC");
        assert_eq!(blocks[1]["type"], "tool_use");
        assert!(!drop_unsigned_thinking(&mut v), "nothing left to drop");
    }

    /// The in-place rename says what the tree rename says, keeping every other byte; the
    /// bodies it leaves to the tree are the ones it cannot read alone.
    #[test]
    fn the_rename_in_place_agrees_with_the_tree() {
        let cases = [
            r#"{"model":"gpt-5","max_tokens":100,"messages":[{"role":"user","content":"say \"max_tokens\": 5"}]}"#,
            r#"{ "max_tokens" : 7 , "stream":true}"#,
            r#"{"messages":[],"max_tokens":null}"#,
            r#"{"max_tokens":1,"max_completion_tokens":2}"#,
            r#"{"max_tokens":1,"max_completion_tokens":null}"#,
            r#"{"nested":{"max_tokens":3}}"#,
        ];
        for body in cases {
            let bytes = Bytes::from(body);
            let mut tree: Value = serde_json::from_str(body).unwrap();
            let changed = rename_max_tokens(&mut tree);
            match renamed_in_place(&bytes) {
                Some(out) => {
                    assert!(changed, "{body}");
                    let got: Value = serde_json::from_slice(&out).unwrap();
                    assert_eq!(got, tree, "{body}");
                    let text = std::str::from_utf8(&out).unwrap();
                    assert_eq!(text.replace("max_completion_tokens", "max_tokens"), body);
                }
                None => assert!(!changed, "{body}: the tree renamed it"),
            }
        }
        // Bodies only the tree reads: a repeated key, an escaped key.
        for body in [
            r#"{"max_tokens":1,"max_tokens":2}"#,
            r#"{"max\u005ftokens":1}"#,
        ] {
            assert_eq!(renamed_in_place(&Bytes::from(body)), None, "{body}");
        }
    }

    #[test]
    fn max_tokens_is_renamed_once_and_only_at_the_top() {
        let mut v = json!({"model": "gpt-5.4", "max_tokens": 32000, "messages": []});
        assert!(rename_max_tokens(&mut v));
        assert_eq!(v["max_completion_tokens"], 32000);
        assert!(v.get("max_tokens").is_none());
        let mut both = json!({"max_tokens": 1, "max_completion_tokens": 2});
        assert!(!rename_max_tokens(&mut both));
    }

    #[test]
    fn the_byte_guard_finds_every_spelling() {
        assert!(has_unsigned_thinking(
            br#"{"signature":"","type":"thinking"}"#
        ));
        assert!(has_unsigned_thinking(
            br#"{"signature": "", "type": "thinking"}"#
        ));
        assert!(has_unsigned_thinking(
            br#"{"type":"thinking","thinking":"x"}"#
        ));
        assert!(!has_unsigned_thinking(
            br#"{"thinking":{"type":"enabled"},"messages":[]}"#
        ));
    }
}
