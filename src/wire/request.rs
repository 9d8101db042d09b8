//! Peeking at a JSON request body — `model`, `stream` and the few other fields routing,
//! billing and stickiness read, in one parse — and the byte-preserving `model` rewrite (R1.3).

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::GatewayError;
use crate::wire::json;
use crate::wire::lenient::{Count, Lenient};
use crate::wire::scan::{self, Want};

/// Byte ranges (into the body) of the top-level fields the default sticky-key ladder reads
/// (R8.2), and the number of turns (`messages` or `input` elements), found by the request's
/// one parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopFields {
    pub metadata: Option<(usize, usize)>,
    pub conversation_id: Option<(usize, usize)>,
    pub conversation: Option<(usize, usize)>,
    pub session_id: Option<(usize, usize)>,
    pub prompt_cache_key: Option<(usize, usize)>,
    pub user: Option<(usize, usize)>,
    pub turns: usize,
}

/// The few fields the gateway reads from a JSON request body, all taken in one parse
/// (routing, the billing estimate and the sticky key used to scan the body three times).
#[derive(Debug, Clone)]
pub struct Peek {
    /// Shared: the request log's record takes a clone, not a copy.
    pub model: Option<Arc<str>>,
    /// Byte range of the `model` value (the JSON string token, quotes included).
    pub model_span: Option<(usize, usize)>,
    pub stream: bool,
    /// Byte range of the `stream` value token, when present.
    pub stream_span: Option<(usize, usize)>,
    /// `max_completion_tokens`, `max_tokens` or `max_output_tokens`, for the estimate (R11.1).
    pub completion_hint: Option<u64>,
    /// The top-level fields of the default sticky-key ladder (R8.2).
    pub top: TopFields,
    /// Where the top-level `max_tokens` key is, for renaming it without another parse.
    pub max_tokens_key: MaxTokensKey,
    /// The body's input-token estimate (`wire::tokens`), made by the same pass when the
    /// fast one took the body; `None` leaves it to be made on first use.
    pub input_tokens: Option<u64>,
}

/// Where a body's top-level `max_tokens` member stands, as its one parse found it: what a
/// rename to `max_completion_tokens` (B-max-tokens-field) needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensKey {
    /// Nothing to rename: no top-level `max_tokens`, or `max_completion_tokens` beside it.
    #[default]
    Absent,
    /// The key's byte range, quotes included.
    At((usize, usize)),
    /// There, but its key is not written plainly (escaped): only a tree finds it.
    Unplaced,
}

#[derive(Deserialize)]
struct RawPeek<'a> {
    #[serde(borrow)]
    model: Option<&'a RawValue>,
    #[serde(borrow)]
    stream: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "json::raw_or_null")]
    max_completion_tokens: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "json::raw_or_null")]
    max_tokens: Option<&'a RawValue>,
    #[serde(default)]
    max_output_tokens: Lenient,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    #[serde(borrow, default)]
    conversation_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    conversation: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    prompt_cache_key: Option<&'a RawValue>,
    #[serde(borrow, default)]
    user: Option<&'a RawValue>,
    #[serde(default)]
    messages: Count,
    #[serde(default)]
    input: Count,
}

/// The members [`RawPeek`] reads, in the order of [`Fields::from_scan`]'s slots: all read
/// as text but the two counted ones.
const WANTED: [Want; 13] = [
    text("model"),
    text("stream"),
    text("max_completion_tokens"),
    text("max_tokens"),
    text("max_output_tokens"),
    text("metadata"),
    text("conversation_id"),
    text("conversation"),
    text("session_id"),
    text("prompt_cache_key"),
    text("user"),
    Want {
        name: "messages",
        text: false,
    },
    Want {
        name: "input",
        text: false,
    },
];

const fn text(name: &'static str) -> Want {
    Want { name, text: true }
}

/// The members as raw JSON text borrowed from the body, whichever parse found them.
/// `Option` members read `null` as absent, as `Option<&RawValue>` does; the two
/// `raw_or_null` limits keep it.
struct Fields<'a> {
    model: Option<&'a str>,
    stream: Option<&'a str>,
    max_completion_tokens: Option<&'a str>,
    max_tokens: Option<&'a str>,
    max_output_tokens: Option<u64>,
    metadata: Option<&'a str>,
    conversation_id: Option<&'a str>,
    conversation: Option<&'a str>,
    session_id: Option<&'a str>,
    prompt_cache_key: Option<&'a str>,
    user: Option<&'a str>,
    turns: usize,
    /// The input-token estimate, when the pass that found the members made it.
    input_tokens: Option<u64>,
}

impl<'a> Fields<'a> {
    /// The fast pass (`wire::scan`); `None` leaves the body to `serde_json`.
    fn from_scan(body: &'a [u8]) -> Option<Fields<'a>> {
        let found = scan::top_members(body, &WANTED)?;
        let m = &found.members;
        let text = |i: usize| m[i].and_then(|m| m.text);
        let absent_if_null = |t: Option<&'a str>| t.filter(|t| *t != "null");
        let turns = |i: usize| m[i].map_or(0, |m| m.elements);
        Some(Fields {
            model: absent_if_null(text(0)),
            stream: absent_if_null(text(1)),
            max_completion_tokens: text(2),
            max_tokens: text(3),
            // Read in the full parse too: what it refuses there (a number out of range) is
            // left to it.
            max_output_tokens: match text(4) {
                Some(t) => serde_json::from_str::<Lenient>(t).ok()?.0,
                None => None,
            },
            metadata: absent_if_null(text(5)),
            conversation_id: absent_if_null(text(6)),
            conversation: absent_if_null(text(7)),
            session_id: absent_if_null(text(8)),
            prompt_cache_key: absent_if_null(text(9)),
            user: absent_if_null(text(10)),
            turns: turns(11).max(turns(12)),
            input_tokens: Some(found.tally.total(body.len())),
        })
    }

    /// The full parse: what it refuses is a 400 with its own words.
    fn from_serde(body: &'a [u8]) -> Result<Fields<'a>, GatewayError> {
        let raw: RawPeek =
            serde_json::from_slice(body).map_err(|e| GatewayError::bad_json(&e.to_string()))?;
        let get = |r: Option<&'a RawValue>| r.map(RawValue::get);
        Ok(Fields {
            model: get(raw.model),
            stream: get(raw.stream),
            max_completion_tokens: get(raw.max_completion_tokens),
            max_tokens: get(raw.max_tokens),
            max_output_tokens: raw.max_output_tokens.0,
            metadata: get(raw.metadata),
            conversation_id: get(raw.conversation_id),
            conversation: get(raw.conversation),
            session_id: get(raw.session_id),
            prompt_cache_key: get(raw.prompt_cache_key),
            user: get(raw.user),
            turns: raw.messages.0.max(raw.input.0),
            input_tokens: None,
        })
    }
}

/// Parse the body enough to route, bill and pin it. Bodies that are not a JSON object are
/// a 400. One pass (`wire::scan`) takes almost every body; what it is not sure of goes to
/// `serde_json`, which gives the same fields or the error.
pub fn peek(body: &[u8]) -> Result<Peek, GatewayError> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(GatewayError::bad_json("expected a JSON object"));
    }
    let fields = match Fields::from_scan(body) {
        Some(f) => f,
        None => Fields::from_serde(body)?,
    };
    read_fields(body, fields)
}

/// The peek of the members either parse found.
fn read_fields(body: &[u8], fields: Fields<'_>) -> Result<Peek, GatewayError> {
    let (model, model_span) = match fields.model {
        Some(m) => {
            // A name without escapes is read in place; one with escapes is unescaped first.
            let model: Arc<str> = match serde_json::from_str::<&str>(m) {
                Ok(plain) => Arc::from(plain),
                Err(_) => serde_json::from_str::<String>(m)
                    .map_err(|_| GatewayError::missing_model())?
                    .into(),
            };
            (Some(model), Some(json::span_of_str(body, m)))
        }
        None => (None, None),
    };
    let (stream, stream_span) = match fields.stream {
        Some(s) => (s == "true", Some(json::span_of_str(body, s))),
        None => (false, None),
    };
    let span = |r: Option<&str>| r.map(|r| json::span_of_str(body, r));
    let number = |r: Option<&str>| {
        r.and_then(|r| serde_json::from_str::<Lenient>(r).ok())
            .and_then(|n| n.0)
    };
    let max_tokens_key = match (fields.max_tokens, fields.max_completion_tokens) {
        (Some(v), None) => json::key_before(body, json::span_of_str(body, v).0, "max_tokens")
            .map_or(MaxTokensKey::Unplaced, MaxTokensKey::At),
        _ => MaxTokensKey::Absent,
    };
    Ok(Peek {
        model,
        model_span,
        stream,
        stream_span,
        completion_hint: number(fields.max_completion_tokens)
            .or(number(fields.max_tokens))
            .or(fields.max_output_tokens),
        max_tokens_key,
        top: TopFields {
            metadata: span(fields.metadata),
            conversation_id: span(fields.conversation_id),
            conversation: span(fields.conversation),
            session_id: span(fields.session_id),
            prompt_cache_key: span(fields.prompt_cache_key),
            user: span(fields.user),
            turns: fields.turns,
        },
        input_tokens: fields.input_tokens,
    })
}

/// The body to send upstream with `model` rewritten to `upstream_model` (only when it differs).
pub fn rewrite_model(body: &Bytes, peek: &Peek, upstream_model: &str) -> Bytes {
    match model_edit(peek, upstream_model) {
        Some((span, quoted)) => json::splice(body, span, quoted.as_bytes()),
        None => body.clone(),
    }
}

/// The edit [`rewrite_model`] makes: the `model` value's span and the new value as JSON;
/// `None` when the model stays (or the body had none).
pub fn model_edit(peek: &Peek, upstream_model: &str) -> Option<((usize, usize), String)> {
    match (&peek.model, peek.model_span) {
        (Some(m), Some(span)) if **m != *upstream_model => {
            let quoted = serde_json::to_string(upstream_model)
                .unwrap_or_else(|_| format!("\"{upstream_model}\""));
            Some((span, quoted))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one parse places the top-level `max_tokens` key for a rename without parsing
    /// again (B-max-tokens-field): not a nested one, not beside `max_completion_tokens`,
    /// `null` included, an escaped key left to the tree.
    #[test]
    fn peek_places_the_top_level_max_tokens_key() {
        let at = |body: &str| -> Option<String> {
            match peek(body.as_bytes()).unwrap().max_tokens_key {
                MaxTokensKey::At((a, b)) => Some(body[a..b].to_string()),
                MaxTokensKey::Absent => None,
                MaxTokensKey::Unplaced => Some("unplaced".into()),
            }
        };
        let key = Some("\"max_tokens\"".to_string());
        assert_eq!(at(r#"{"model":"m","max_tokens":5}"#), key);
        assert_eq!(at(r#"{ "max_tokens" :	null , "model":"m"}"#), key);
        assert_eq!(at(r#"{"model":"m","tools":[{"max_tokens":5}]}"#), None);
        assert_eq!(at(r#"{"max_tokens":5,"max_completion_tokens":6}"#), None);
        assert_eq!(at(r#"{"max\u005ftokens":5}"#), Some("unplaced".into()));
        assert_eq!(at(r#"{"xmax_tokens":5}"#), None);
        // The estimate's hint reads the same members as before.
        let p = peek(br#"{"max_tokens":"many","max_output_tokens":9}"#).unwrap();
        assert_eq!(p.completion_hint, Some(9));
        let p = peek(br#"{"max_tokens":12,"max_completion_tokens":null}"#).unwrap();
        assert_eq!(p.completion_hint, Some(12));
    }

    #[test]
    fn peek_and_rewrite_keep_other_bytes() {
        let body = Bytes::from_static(br#"{ "messages":[{"role":"user","content":"hi \"x\""}], "model" : "deepseek-chat","stream":true , "n":1}"#);
        let peeked = peek(&body).unwrap();
        assert_eq!(peeked.model.as_deref(), Some("deepseek-chat"));
        assert!(peeked.stream);
        let out = rewrite_model(&body, &peeked, "deepseek-v3");
        assert_eq!(
            &out[..],
            &br#"{ "messages":[{"role":"user","content":"hi \"x\""}], "model" : "deepseek-v3","stream":true , "n":1}"#[..]
        );
    }

    #[test]
    fn same_model_is_not_copied() {
        let body = Bytes::from_static(br#"{"model":"m"}"#);
        let peeked = peek(&body).unwrap();
        assert_eq!(rewrite_model(&body, &peeked, "m"), body);
    }

    #[test]
    fn bad_json_and_non_string_model() {
        assert_eq!(peek(b"{not json").unwrap_err().code, "invalid_json");
        assert_eq!(peek(b"[1,2]").unwrap_err().code, "invalid_json");
        assert_eq!(peek(br#"{"model":5}"#).unwrap_err().code, "missing_model");
        assert!(peek(br#"{"prompt":"x"}"#).unwrap().model.is_none());
    }

    #[test]
    fn escaped_model_name_is_decoded() {
        let peeked = peek(br#"{"model":"a\u0062c"}"#).unwrap();
        assert_eq!(peeked.model.as_deref(), Some("abc"));
    }
    /// One parse gives routing, billing and sticky-key facts: the completion limit by
    /// precedence (wrong types skipped), the sticky fields' exact spans, the turn count of
    /// `messages` or `input` (0 for a string `input`).
    #[test]
    fn peek_collects_billing_and_sticky_facts() {
        let body = br#"{"model":"m","max_tokens":50,"max_completion_tokens":"x","max_output_tokens":70,
            "metadata":{"user_id":"u1"},"user":"bob","messages":[{"role":"user"},{"role":"assistant"},{}],
            "input":"text","prompt_cache_key":"k1"}"#;
        let peeked = peek(body).unwrap();
        assert_eq!(peeked.completion_hint, Some(50));
        let text = std::str::from_utf8(body).unwrap();
        let at = |s: Option<(usize, usize)>| s.map(|(a, b)| &text[a..b]);
        assert_eq!(at(peeked.top.metadata), Some(r#"{"user_id":"u1"}"#));
        assert_eq!(at(peeked.top.user), Some(r#""bob""#));
        assert_eq!(at(peeked.top.prompt_cache_key), Some(r#""k1""#));
        assert_eq!(peeked.top.conversation_id, None);
        assert_eq!(peeked.top.turns, 3);
        let peeked = peek(br#"{"model":"m","input":[1,2],"max_output_tokens":9}"#).unwrap();
        assert_eq!((peeked.completion_hint, peeked.top.turns), (Some(9), 2));
        let peeked = peek(br#"{"model":"m"}"#).unwrap();
        assert_eq!((peeked.completion_hint, peeked.top.turns), (None, 0));
        // Still a clear 400 for what is not a JSON object.
        assert!(peek(b"[1]").is_err());
        assert!(peek(br#"{"model":"m","messages":[}"#).is_err());
    }
}

#[cfg(test)]
#[path = "tests/request_fast.rs"]
mod fast_tests;
