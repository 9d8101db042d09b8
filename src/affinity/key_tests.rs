//! Tests for sticky key extraction and the binding store (R8.1–R8.3).
use std::time::Duration;

use http::HeaderMap;

use super::*;
use crate::affinity::store::Bindings;
use crate::config::model::{Affinity, AffinityRule, Sticky};

fn aff(rules: Vec<AffinityRule>) -> Affinity {
    Affinity {
        rules,
        sticky: Sticky {
            conversation_ttl: Duration::from_secs(7200),
            session_ttl: Duration::from_secs(7000),
            user_model_ttl: Duration::from_secs(1800),
            bucket_ttl: Duration::from_secs(600),
        },
    }
}

/// The key of a request as the gateway computes it: from the fields the request's one
/// parse found (`wire::request::peek`).
fn key(
    affinity: &Affinity,
    model: &str,
    path: &str,
    headers: &HeaderMap,
    body: &str,
) -> Option<StickyKey> {
    let peek = crate::wire::request::peek(body.as_bytes()).ok();
    sticky_key(&KeyInput {
        affinity,
        group: "default",
        model,
        path,
        client: "alice",
        headers,
        body: Some(body.as_bytes()),
        top: peek.as_ref().map(|p| &p.top),
    })
}

#[test]
fn default_rules_match_model_and_path() {
    let affinity = aff(crate::config::default_affinity_rules());
    let headers = HeaderMap::new();
    let sticky_key = key(
        &affinity,
        "gpt-5",
        "/v1/responses",
        &headers,
        r#"{"prompt_cache_key":"abc"}"#,
    )
    .unwrap();
    assert_eq!(sticky_key.kind, StickyKind::Rule);
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "gpt-5", StickyKind::Rule, "abc")
    );
    let k2 = key(
        &affinity,
        "gpt-5",
        "/v1/responses",
        &headers,
        r#"{"prompt_cache_key":"abd"}"#,
    )
    .unwrap();
    assert_ne!(sticky_key.hash, k2.hash);
    let sticky = key(
        &affinity,
        "claude-x",
        "/v1/messages",
        &headers,
        r#"{"metadata":{"user_id":"u\u0031"},"messages":[]}"#,
    )
    .unwrap();
    assert_eq!(sticky.kind, StickyKind::Rule);
    assert_eq!(
        sticky.hash,
        key_hash("alice", "default", "claude-x", StickyKind::Rule, "u1")
    );
    // Wrong path for the rule: prompt_cache_key still counts, as a session id.
    let sticky = key(
        &affinity,
        "gpt-5",
        "/v1/chat/completions",
        &headers,
        r#"{"prompt_cache_key":"abc"}"#,
    )
    .unwrap();
    assert_eq!(sticky.kind, StickyKind::Session);
}

#[test]
fn header_rule_and_precedence() {
    let mut headers = HeaderMap::new();
    headers.insert("x-session-id", "s1".parse().unwrap());
    let affinity = aff(vec![]);
    let body = r#"{"user":"bob","metadata":{"conversation_id":"c9"}}"#;
    let sticky_key = key(&affinity, "m", "/v1/chat/completions", &headers, body).unwrap();
    assert_eq!(sticky_key.kind, StickyKind::Conversation);
    assert_eq!(sticky_key.ttl, Duration::from_secs(7200));
    let sticky_key = key(
        &affinity,
        "m",
        "/v1/chat/completions",
        &headers,
        r#"{"user":"bob"}"#,
    )
    .unwrap();
    assert_eq!(
        (sticky_key.kind, sticky_key.ttl),
        (StickyKind::Session, Duration::from_secs(7000))
    );
    let sticky_key = key(
        &affinity,
        "m",
        "/v1/chat/completions",
        &HeaderMap::new(),
        r#"{"user":"bob"}"#,
    )
    .unwrap();
    assert_eq!(
        (sticky_key.kind, sticky_key.ttl),
        (StickyKind::User, Duration::from_secs(1800))
    );
    let sticky_key = key(
        &affinity,
        "m",
        "/v1/responses",
        &HeaderMap::new(),
        r#"{"conversation":{"id":"cv"}}"#,
    )
    .unwrap();
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "m", StickyKind::Conversation, "cv")
    );
}

#[test]
fn client_model_only_for_follow_up_turns() {
    let affinity = aff(vec![]);
    let headers = HeaderMap::new();
    assert!(key(
        &affinity,
        "m",
        "/v1/chat/completions",
        &headers,
        r#"{"messages":[{"a":1}]}"#
    )
    .is_none());
    let sticky_key = key(
        &affinity,
        "m",
        "/v1/chat/completions",
        &headers,
        r#"{"messages":[{},{}]}"#,
    )
    .unwrap();
    assert_eq!(sticky_key.kind, StickyKind::ClientModel);
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "m", StickyKind::ClientModel, "alice")
    );
    let sticky = key(
        &affinity,
        "",
        "/v1/custom",
        &headers,
        r#"{"input":[1,2,3]}"#,
    )
    .unwrap();
    assert_eq!(
        (sticky.kind, sticky.ttl),
        (StickyKind::Bucket, Duration::from_secs(600))
    );
    // Null, empty and array values are not keys.
    assert!(key(
        &affinity,
        "m",
        "/v1/chat/completions",
        &headers,
        r#"{"user":"","session_id":null}"#
    )
    .is_none());
}

#[test]
fn header_rule_key() {
    let mut rules = crate::config::default_affinity_rules();
    rules[0].key = crate::config::model::AffinityKey::Header("x-trace".parse().unwrap());
    rules[0].skip_retry_on_failure = true;
    let affinity = aff(rules);
    let mut headers = HeaderMap::new();
    headers.insert("x-trace", "t1".parse().unwrap());
    let sticky_key = key(&affinity, "gpt-4o", "/v1/responses", &headers, "{}").unwrap();
    assert_eq!(sticky_key.kind, StickyKind::Rule);
    assert!(sticky_key.skip_retry);
}

/// Claude Code's `metadata.user_id` in today's JSON form and the older `user_…_session_…`
/// form (B-client-compat).
#[test]
fn claude_code_identities() {
    let json = r#"{"device_id":"dev1","account_uuid":"acc","session_id":"s-1"}"#;
    assert_eq!(
        claude_identity(json),
        Some(ClaudeIdentity {
            session: Some("s-1".into()),
            device: Some("dev1".into())
        })
    );
    let no_session = r#"{"device_id":"dev1","account_uuid":"","session_id":""}"#;
    assert_eq!(claude_identity(no_session).unwrap().session, None);
    assert_eq!(
        claude_identity("user_abc_account_9f_session_77").unwrap(),
        ClaudeIdentity {
            session: Some("77".into()),
            device: Some("user_abc".into())
        }
    );
    assert_eq!(claude_identity("plain-user"), None);
    assert_eq!(claude_identity("{not json"), None);
    assert_eq!(claude_identity(r#"{"other":1}"#), None);
}

fn claude_body(user_id: &str) -> String {
    serde_json::json!({"model": "x", "metadata": {"user_id": user_id}, "messages": []}).to_string()
}

/// The default Claude rule keys on the session inside `metadata.user_id`, else the device;
/// without a rule the session is a session-level key and matches Claude Code's
/// `x-claude-code-session-id` header.
#[test]
fn claude_code_keys_on_its_session() {
    let affinity = aff(crate::config::default_affinity_rules());
    let headers = HeaderMap::new();
    let one = r#"{"device_id":"dev1","account_uuid":"acc","session_id":"s-1"}"#;
    let other_acc = r#"{"device_id":"dev2","account_uuid":"","session_id":"s-1"}"#;
    let sticky_key = key(
        &affinity,
        "claude-x",
        "/v1/messages",
        &headers,
        &claude_body(one),
    )
    .unwrap();
    assert_eq!(sticky_key.kind, StickyKind::Rule);
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "claude-x", StickyKind::Rule, "s-1")
    );
    let k2 = key(
        &affinity,
        "claude-x",
        "/v1/messages",
        &headers,
        &claude_body(other_acc),
    )
    .unwrap();
    assert_eq!(sticky_key.hash, k2.hash, "one session, one key");
    let dev = r#"{"device_id":"dev1","account_uuid":"acc","session_id":""}"#;
    let sticky_key = key(
        &affinity,
        "claude-x",
        "/v1/messages",
        &headers,
        &claude_body(dev),
    )
    .unwrap();
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "claude-x", StickyKind::Rule, "dev1")
    );

    // No rule for this model: the ladder.
    let sticky_key = key(
        &affinity,
        "sonnet",
        "/v1/messages",
        &headers,
        &claude_body(one),
    )
    .unwrap();
    assert_eq!(
        (sticky_key.kind, sticky_key.ttl),
        (StickyKind::Session, Duration::from_secs(7000))
    );
    let mut hh = HeaderMap::new();
    hh.insert("x-claude-code-session-id", "s-1".parse().unwrap());
    let by_header = key(
        &affinity,
        "sonnet",
        "/v1/messages",
        &hh,
        r#"{"messages":[]}"#,
    )
    .unwrap();
    assert_eq!(by_header.hash, sticky_key.hash, "header and metadata agree");
    let sticky_key = key(
        &affinity,
        "sonnet",
        "/v1/messages",
        &headers,
        &claude_body(dev),
    )
    .unwrap();
    assert_eq!(sticky_key.kind, StickyKind::User);
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "sonnet", StickyKind::User, "dev1")
    );
}

/// Codex sends `session-id` and `thread-id` headers (plus `prompt_cache_key`).
#[test]
fn codex_headers() {
    let affinity = aff(vec![]);
    let mut headers = HeaderMap::new();
    headers.insert("session-id", "sess".parse().unwrap());
    let sticky_key = key(
        &affinity,
        "gpt-5",
        "/v1/responses",
        &headers,
        r#"{"input":"hi"}"#,
    )
    .unwrap();
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "gpt-5", StickyKind::Session, "sess")
    );
    headers.insert("thread-id", "th".parse().unwrap());
    let sticky_key = key(
        &affinity,
        "gpt-5",
        "/v1/responses",
        &headers,
        r#"{"input":"hi"}"#,
    )
    .unwrap();
    assert_eq!(
        sticky_key.hash,
        key_hash("alice", "default", "gpt-5", StickyKind::Conversation, "th")
    );
}

/// The session headers are read in their listed order, not the request's: the first name
/// whose first value is non-blank wins; a blank or non-text value passes to the next name,
/// and a name's second value is never read.
#[test]
fn session_headers_in_their_order() {
    let affinity = aff(vec![]);
    let session_of = |headers: &HeaderMap| {
        key(&affinity, "m", "/v1/chat/completions", headers, "{}").map(|k| (k.kind, k.hash))
    };
    let want = |v: &str| {
        Some((
            StickyKind::Session,
            key_hash("alice", "default", "m", StickyKind::Session, v),
        ))
    };
    let mut headers = HeaderMap::new();
    headers.append("x-claude-code-session-id", "last".parse().unwrap());
    headers.append("session-id", "third".parse().unwrap());
    headers.append("x-session-id", "  ".parse().unwrap());
    assert_eq!(
        session_of(&headers),
        want("third"),
        "blank x-session-id skipped"
    );
    headers.append("x-session-id", "second-value".parse().unwrap());
    assert_eq!(
        session_of(&headers),
        want("third"),
        "only a name's first value"
    );
    headers.insert("x-session-id", HeaderValue::from_bytes(b"\xff").unwrap());
    assert_eq!(session_of(&headers), want("third"), "non-text skipped");
    headers.insert("x-session-id", " first ".parse().unwrap());
    assert_eq!(
        session_of(&headers),
        want("first"),
        "trimmed, first in order"
    );
    headers.remove("x-session-id");
    headers.remove("session-id");
    assert_eq!(session_of(&headers), want("last"));
    headers.remove("x-claude-code-session-id");
    assert_eq!(session_of(&headers), None);
}

/// B-tenants: the same id from two clients is two keys.
#[test]
fn keys_are_scoped_by_client() {
    let affinity_rules = aff(vec![]);
    let no_headers = HeaderMap::new();
    let body = r#"{"user":"1"}"#;
    let peek = crate::wire::request::peek(body.as_bytes()).ok();
    let for_client = |client: &str| {
        sticky_key(&KeyInput {
            affinity: &affinity_rules,
            group: "default",
            model: "m",
            path: "/v1/chat/completions",
            client,
            headers: &no_headers,
            body: Some(body.as_bytes()),
            top: peek.as_ref().map(|p| &p.top),
        })
        .unwrap()
        .hash
    };
    assert_ne!(for_client("alice"), for_client("bob"));
}

fn sk(hash: u128, ttl: u64) -> StickyKey {
    StickyKey {
        kind: StickyKind::Session,
        hash,
        ttl: Duration::from_secs(ttl),
        skip_retry: false,
    }
}

#[tokio::test(start_paused = true)]
async fn bindings_expire_on_ttl() {
    let bindings = Bindings::default();
    bindings.bind(&sk(1, 60), "a");
    assert_eq!(bindings.get(1).unwrap().channel.as_ref(), "a");
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(bindings.get(1).is_some());
    bindings.bind(&sk(2, 10), "b");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(bindings.get(1).is_none(), "expired on read");
    assert_eq!(bindings.len(), 1);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(bindings.sweep(), 1);
    assert!(bindings.is_empty());
}

#[tokio::test(start_paused = true)]
async fn refresh_extends_and_cap_evicts_soonest_expiring() {
    let bindings = Bindings::with_capacity(1, 3);
    bindings.bind(&sk(1, 100), "a");
    bindings.bind(&sk(2, 50), "a");
    bindings.bind(&sk(3, 200), "a");
    bindings.bind(&sk(2, 300), "b"); // refresh: no eviction, moves the binding
    assert_eq!(bindings.len(), 3);
    bindings.bind(&sk(4, 10), "c");
    assert_eq!(bindings.len(), 3);
    assert!(bindings.get(1).is_none(), "soonest-expiring evicted");
    assert_eq!(bindings.get(2).unwrap().channel.as_ref(), "b");
    assert!(bindings.get(3).is_some() && bindings.get(4).is_some());
    // Expired entries go first when the shard is full.
    tokio::time::advance(Duration::from_secs(11)).await;
    bindings.bind(&sk(5, 10), "d");
    assert!(bindings.get(3).is_some() && bindings.get(2).is_some() && bindings.get(5).is_some());
}

#[tokio::test(start_paused = true)]
async fn dirty_bindings_round_trip_row_keys() {
    let bindings = Bindings::default();
    bindings.bind(&sk(0xabc, 60), "a");
    let dirty = bindings.take_dirty();
    assert_eq!(dirty.len(), 1);
    assert!(bindings.take_dirty().is_empty());
    let row = crate::affinity::persist::row_key(dirty[0].1.kind, dirty[0].0);
    assert_eq!(
        crate::affinity::persist::parse_row_key(&row),
        Some((StickyKind::Session, 0xabc))
    );
    assert_eq!(crate::affinity::persist::parse_row_key("nope:zz"), None);
}

/// The ladder reads only its fields' bytes as text: a byte that is not UTF-8 elsewhere in
/// the body (inside a message, which the parse skips) does not lose the conversation key.
#[test]
fn a_stray_byte_elsewhere_in_the_body_keeps_the_conversation_key() {
    let affinity = aff(vec![]);
    let headers = HeaderMap::new();
    let mut body = br#"{"conversation_id":"c-1","messages":[{"role":"user","content":"x"#.to_vec();
    body.push(0xFF);
    body.extend_from_slice(br#""}]}"#);
    let peek = crate::wire::request::peek(&body).expect("the parse skips message text");
    let k = sticky_key(&KeyInput {
        affinity: &affinity,
        group: "default",
        model: "m",
        path: "/v1/chat/completions",
        client: "alice",
        headers: &headers,
        body: Some(&body),
        top: Some(&peek.top),
    })
    .expect("a key");
    assert_eq!(k.kind, StickyKind::Conversation);
    assert_eq!(
        k.hash,
        key_hash("alice", "default", "m", StickyKind::Conversation, "c-1")
    );
}
