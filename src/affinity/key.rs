//! Sticky key extraction: affinity rule match → key, else the sticky precedence of R8.2.
//!
//! The body is parsed only when a rule with a `body.` key matches or the sticky fields are
//! needed, and then only shallowly: top-level values are kept as raw JSON slices and just
//! the fields read here are decoded. The value is hashed at once; nothing raw is kept.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

use crate::config::model::{Affinity, AffinityKey, AffinityRule};

/// Number of buckets of the last sticky level (R8.2).
pub const BUCKETS: u64 = 64;

/// Which field a sticky key came from (a bounded metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StickyKind {
    /// An `affinity.rules` entry matched (R8.1).
    Rule,
    Conversation,
    Session,
    /// A stable user id carried in the body.
    User,
    /// The authenticated client + the public model.
    ClientModel,
    /// Hash bucket of client + path, for follow-up turns without a model.
    Bucket,
}

impl StickyKind {
    pub const ALL: [StickyKind; 6] = [
        StickyKind::Rule,
        StickyKind::Conversation,
        StickyKind::Session,
        StickyKind::User,
        StickyKind::ClientModel,
        StickyKind::Bucket,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StickyKind::Rule => "rule",
            StickyKind::Conversation => "conversation",
            StickyKind::Session => "session",
            StickyKind::User => "user",
            StickyKind::ClientModel => "client_model",
            StickyKind::Bucket => "bucket",
        }
    }

    pub fn parse(name: &str) -> Option<StickyKind> {
        StickyKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// The sticky key of one request: a hash of (client, group, public model, kind, value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StickyKey {
    pub kind: StickyKind,
    pub hash: u128,
    pub ttl: Duration,
    /// `skip_retry_on_failure` of the matched rule (R8.4); false for the sticky levels.
    pub skip_retry: bool,
}

/// What a sticky key is computed from.
pub struct KeyInput<'a> {
    pub affinity: &'a Affinity,
    /// The client's group (`auto` for auto clients).
    pub group: &'a str,
    /// The public model ("" for pass-through paths).
    pub model: &'a str,
    pub path: &'a str,
    /// Client name (the key id, never the key).
    pub client: &'a str,
    pub headers: &'a HeaderMap,
    /// The JSON body, when the request has one.
    pub body: Option<&'a [u8]>,
    /// The default ladder's top-level fields, found by the request's one parse of the body
    /// (`wire::request::peek`); `None` when the body is not a JSON object.
    pub top: Option<&'a TopFields>,
}

/// Byte ranges of the top-level fields the default key ladder reads (found by the
/// request's one parse, `wire::request::peek`).
pub use crate::wire::request::TopFields;

impl TopFields {
    /// The fields as borrowed JSON values of `body` (the body they were found in). Only
    /// the fields' own bytes are read as text, not the whole body.
    fn known<'a>(&self, body: &'a [u8]) -> Known<'a> {
        let raw = |s: Option<(usize, usize)>| {
            s.and_then(|(a, b)| body.get(a..b))
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| serde_json::from_str::<&RawValue>(t).ok())
        };
        Known {
            metadata: raw(self.metadata),
            conversation_id: raw(self.conversation_id),
            conversation: raw(self.conversation),
            session_id: raw(self.session_id),
            prompt_cache_key: raw(self.prompt_cache_key),
            user: raw(self.user),
            user_id: None,
        }
    }
}

/// Header names that carry a conversation id (`thread-id`: Codex).
/// Parsed names (`HeaderName`), not `&str`: a `&str` lookup parses and validates the name on
/// every call (six per request here).
pub static CONVERSATION_HEADERS: [HeaderName; 2] = [
    HeaderName::from_static("x-conversation-id"),
    HeaderName::from_static("thread-id"),
];
/// Header names that carry a session id (`session-id`: Codex; `x-claude-code-session-id`:
/// Claude Code).
pub static SESSION_HEADERS: [HeaderName; 4] = [
    HeaderName::from_static("x-session-id"),
    HeaderName::from_static("session_id"),
    HeaderName::from_static("session-id"),
    HeaderName::from_static("x-claude-code-session-id"),
];

/// Hash of (client, group, model, kind, value): the binding map key (R8.2: keys are stored
/// hashed). The client is part of it, so two tenants sending the same id (`user: "1"`)
/// have two bindings and neither can steer the other's (B-tenants).
pub fn key_hash(client: &str, group: &str, model: &str, kind: StickyKind, value: &str) -> u128 {
    let mut hasher = Sha256::new();
    for part in [client, group, model, kind.as_str(), value] {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(bytes)
}

type Fields<'a> = HashMap<String, &'a RawValue>;

fn object(json: &str) -> Option<Fields<'_>> {
    serde_json::from_str(json).ok()
}

/// A scalar JSON value as key text: strings decoded, numbers/bools as written;
/// `{"id": ...}` objects give their `id`. Empty strings, null, arrays give nothing.
fn scalar(raw: &RawValue) -> Option<String> {
    let text = raw.get().trim();
    let value = match text.as_bytes().first()? {
        b'"' => serde_json::from_str::<String>(text).ok()?,
        b'{' => return object(text)?.get("id").and_then(|r| scalar(r)),
        b'n' | b'[' => return None,
        _ => text.to_string(),
    };
    (!value.is_empty()).then_some(value)
}

fn body_path(body: &[u8], path: &[String]) -> Option<String> {
    let mut cur: &str = std::str::from_utf8(body).ok()?;
    for seg in path {
        let raw = *object(cur)?.get(seg)?;
        cur = raw.get();
    }
    let raw: &RawValue = serde_json::from_str(cur).ok()?;
    scalar(raw)
}

/// The first of `names` (in their order) whose first value is non-blank text, trimmed.
/// One pass over the request's headers, comparing names, instead of one hashed lookup per
/// name: a request carries a handful of headers, and most of these names are absent.
fn header<const N: usize>(headers: &HeaderMap, names: &[HeaderName; N]) -> Option<String> {
    let mut first: [Option<&HeaderValue>; N] = [None; N];
    for (name, value) in headers {
        if let Some(i) = names.iter().position(|n| n == name) {
            first[i].get_or_insert(value);
        }
    }
    first.into_iter().flatten().find_map(|v| {
        v.to_str()
            .ok()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    })
}

/// The fields of the default key ladder, borrowed: the top level's come from the request's
/// spans (`TopFields`), `metadata`'s from parsing that one object, skipping every other
/// field without copying or hashing it.
#[derive(serde::Deserialize, Default)]
struct Known<'a> {
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
    #[serde(borrow, default)]
    user_id: Option<&'a RawValue>,
}

impl<'a> Known<'a> {
    fn parse(json: &'a str) -> Option<Known<'a>> {
        serde_json::from_str(json).ok()
    }

    fn get(&self, name: &str) -> Option<&'a RawValue> {
        match name {
            "metadata" => self.metadata,
            "conversation_id" => self.conversation_id,
            "conversation" => self.conversation,
            "session_id" => self.session_id,
            "prompt_cache_key" => self.prompt_cache_key,
            "user" => self.user,
            "user_id" => self.user_id,
            _ => None,
        }
    }
}

fn field(known: &Known, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| known.get(n).and_then(scalar))
}

/// The parts of a Claude Code `metadata.user_id` that identify a session and a device.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClaudeIdentity {
    pub session: Option<String>,
    pub device: Option<String>,
}

/// Claude Code's `metadata.user_id`: today a JSON string
/// `{"device_id", "account_uuid", "session_id"}`, before that
/// `user_<hash>_account_<uuid>_session_<uuid>`. `None` for any other value.
pub fn claude_identity(user_id: &str) -> Option<ClaudeIdentity> {
    #[derive(serde::Deserialize)]
    struct Json {
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        device_id: Option<String>,
    }
    let non_empty = |v: Option<String>| v.filter(|s| !s.is_empty());
    if user_id.trim_start().starts_with('{') {
        let parsed: Json = serde_json::from_str(user_id).ok()?;
        let id = ClaudeIdentity {
            session: non_empty(parsed.session_id),
            device: non_empty(parsed.device_id),
        };
        return (id.session.is_some() || id.device.is_some()).then_some(id);
    }
    let rest = user_id.strip_prefix("user_")?;
    let (device, session) = rest.split_once("_account_")?;
    let (_, session) = session.split_once("_session_")?;
    Some(ClaudeIdentity {
        session: non_empty(Some(session.to_string())),
        device: non_empty(Some(format!("user_{device}"))),
    })
}

/// A rule's key value: a Claude Code identity keys on its session, else its device.
fn rule_value(value: String) -> String {
    match claude_identity(&value) {
        Some(ClaudeIdentity {
            session: Some(s), ..
        }) => s,
        Some(ClaudeIdentity {
            device: Some(d), ..
        }) if value.trim_start().starts_with('{') => d,
        _ => value,
    }
}

/// The value of the first matching affinity rule (R8.1), when its field is present.
fn rule_key<'a>(input: &KeyInput<'a>) -> Option<(String, &'a AffinityRule)> {
    let rule = input
        .affinity
        .rules
        .iter()
        .find(|rule| rule.path == input.path && rule.model.is_match(input.model))?;
    let value = match &rule.key {
        AffinityKey::Body(p) => input.body.and_then(|b| body_path(b, p)),
        AffinityKey::Header(h) => input
            .headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    };
    Some((rule_value(value?), rule))
}

/// The request's sticky key, if any (R8.1 then R8.2). See the module doc of `affinity`
/// for the fields read on each surface.
pub fn sticky_key(input: &KeyInput) -> Option<StickyKey> {
    let mk = |kind, value: &str, ttl, skip_retry| StickyKey {
        kind,
        hash: key_hash(input.client, input.group, input.model, kind, value),
        ttl,
        skip_retry,
    };
    if let Some((v, rule)) = rule_key(input) {
        return Some(mk(
            StickyKind::Rule,
            &v,
            rule.ttl,
            rule.skip_retry_on_failure,
        ));
    }
    let st = &input.affinity.sticky;
    if let Some(v) = header(input.headers, &CONVERSATION_HEADERS) {
        return Some(mk(StickyKind::Conversation, &v, st.conversation_ttl, false));
    }
    let (top, turns) = match (input.top, input.body) {
        (Some(f), Some(t)) => (f.known(t), f.turns),
        _ => (Known::default(), 0),
    };
    let meta = top
        .metadata
        .and_then(|m| Known::parse(m.get()))
        .unwrap_or_default();
    let (top_f, meta_f) = (&top, &meta);
    let conv = field(meta_f, &["conversation_id"])
        .or_else(|| field(top_f, &["conversation_id", "conversation"]));
    if let Some(v) = conv {
        return Some(mk(StickyKind::Conversation, &v, st.conversation_ttl, false));
    }
    let user_id = field(meta_f, &["user_id"]);
    let claude = user_id
        .as_deref()
        .and_then(claude_identity)
        .unwrap_or_default();
    let session = header(input.headers, &SESSION_HEADERS)
        .or_else(|| field(meta_f, &["session_id"]))
        .or(claude.session)
        .or_else(|| field(top_f, &["session_id", "prompt_cache_key"]));
    if let Some(v) = session {
        return Some(mk(StickyKind::Session, &v, st.session_ttl, false));
    }
    let user = claude
        .device
        .or(user_id)
        .or_else(|| field(top_f, &["user"]));
    if let Some(v) = user {
        return Some(mk(StickyKind::User, &v, st.user_model_ttl, false));
    }
    if turns < 2 {
        return None;
    }
    if !input.model.is_empty() {
        return Some(mk(
            StickyKind::ClientModel,
            input.client,
            st.user_model_ttl,
            false,
        ));
    }
    let bucket = key_hash(
        input.client,
        input.group,
        input.path,
        StickyKind::Bucket,
        "",
    ) % u128::from(BUCKETS);
    let value = format!("{}#{bucket}", input.path);
    Some(mk(StickyKind::Bucket, &value, st.bucket_ttl, false))
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
