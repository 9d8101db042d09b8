//! Tool-call and message ids the translator makes up, and Gemini thought signatures carried
//! inside tool-call ids.
//!
//! Gemini returns function calls without ids (or with ids of its own); a client needs one per
//! call to match its results. The id is `call_<seed>_<n>` (`toolu_<seed>_<n>` for Anthropic
//! clients): `seed` is the gateway's request id (letters and digits only, its last
//! `CALL_SEED_MAX` of them: the gateway's ids end in 80 random bits), `n` the call's position
//! in the answer, so a made-up id has at most 35 characters (OpenAI accepts 40). Nothing is
//! stored: a tool result coming back is matched to its call by the call in the client's
//! history (Gemini matches results by function name).
//!
//! Gemini 3 requires the `thoughtSignature` of a function call back with the call in the next
//! request. It is appended to the id as `__ts__<base64url>` (the id stays within Anthropic's
//! `[a-zA-Z0-9_-]`), and the request writer puts it back on the `functionCall` part. This is
//! the one exception to the 40-character bound: the signature has nowhere else to travel in
//! the client's history. Such an id never reaches an OpenAI-format upstream as it is:
//! `upstream_openai_id` shortens it there.

use super::WireFormat;

/// The id marker before a carried thought signature. Ids made here never contain `__` before it.
const SIG_MARKER: &str = "__ts__";

/// What Gemini documents for function calls whose signature is unknown (history written by
/// another model).
pub(crate) const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Most characters of the request id a made-up tool-call id carries.
const CALL_SEED_MAX: usize = 24;

/// The longest tool-call id OpenAI accepts.
pub(crate) const OPENAI_ID_MAX: usize = 40;

/// Makes ids for one answer.
#[derive(Debug, Clone)]
pub(crate) struct IdGen {
    client: WireFormat,
    seed: String,
}

/// A tool-call id of the client's history as an OpenAI-format upstream accepts it: at most
/// 40 characters. A carried Gemini signature means nothing there and is cut; an id still too
/// long becomes `call_` and 35 hex digits of its SHA-256 (the call and its result map alike).
pub(crate) fn upstream_openai_id(id: String) -> String {
    use sha2::{Digest, Sha256};
    let id = match id.split_once(SIG_MARKER) {
        Some((base, _)) if !base.is_empty() => base.to_string(),
        _ => id,
    };
    if id.len() <= OPENAI_ID_MAX {
        return id;
    }
    let mut hashed = hex::encode(Sha256::digest(id.as_bytes()));
    hashed.truncate(OPENAI_ID_MAX - "call_".len());
    format!("call_{hashed}")
}

impl IdGen {
    pub fn new(client: WireFormat, seed: &str) -> Self {
        let seed: String = seed
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(48)
            .collect();
        IdGen {
            client,
            seed: if seed.is_empty() {
                "0".to_string()
            } else {
                seed
            },
        }
    }

    /// The id of the `n`th tool call: the upstream's own (made safe for Anthropic clients) or
    /// a made-up one, with Gemini's thought signature appended when there is one.
    pub fn call_id(&self, upstream: &str, signature: &str, n: usize) -> String {
        let mut id = if upstream.is_empty() {
            let prefix = match self.client {
                WireFormat::Anthropic => "toolu_",
                _ => "call_",
            };
            let cut = self.seed.len().saturating_sub(CALL_SEED_MAX);
            format!("{prefix}{}_{n}", &self.seed[cut..])
        } else if self.client == WireFormat::Anthropic || !signature.is_empty() {
            safe(upstream)
        } else {
            upstream.to_string()
        };
        if let Some(b64url) = to_b64url(signature) {
            id.push_str(SIG_MARKER);
            id.push_str(&b64url);
        }
        id
    }

    /// An id already chosen upstream (or by `call_id`), as the client may see it: made up when
    /// empty, made Anthropic-safe for Anthropic clients.
    pub fn client_id(&self, id: &str, n: usize) -> String {
        let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        if id.is_empty() {
            self.call_id("", "", n)
        } else if self.client == WireFormat::Anthropic && !id.bytes().all(ok) {
            safe(id)
        } else {
            id.to_string()
        }
    }

    /// The answer's id: the upstream's, or a made-up one in the client's style.
    pub fn message_id(&self, upstream: &str) -> String {
        match (upstream.is_empty(), self.client) {
            (false, _) => upstream.to_string(),
            (true, WireFormat::Anthropic) => format!("msg_{}", self.seed),
            (true, _) => format!("chatcmpl-{}", self.seed),
        }
    }
}

/// Characters outside `[a-zA-Z0-9_-]` become `_`, and `__` is collapsed (the marker stays
/// unambiguous).
fn safe(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out
}

/// Standard base64 → base64url without padding; `None` when `sig` is empty or not base64.
fn to_b64url(sig: &str) -> Option<String> {
    let body = sig.trim_end_matches('=');
    if body.is_empty()
        || !body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    {
        return None;
    }
    Some(
        body.chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect(),
    )
}

/// The Gemini thought signature carried in a tool-call id, as standard padded base64.
pub(crate) fn signature_of(id: &str) -> Option<String> {
    let (_, enc) = id.split_once(SIG_MARKER)?;
    if enc.is_empty()
        || !enc
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return None;
    }
    let mut sig: String = enc
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !sig.len().is_multiple_of(4) {
        sig.push('=');
    }
    Some(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_ids_are_unique_per_call_and_anthropic_safe() {
        let ids = IdGen::new(WireFormat::Anthropic, "req-7f3a:b");
        assert_eq!(ids.call_id("", "", 0), "toolu_req7f3ab_0");
        assert_eq!(ids.call_id("", "", 1), "toolu_req7f3ab_1");
        assert_eq!(ids.call_id("call.x:y", "", 0), "call_x_y");
        let openai_ids = IdGen::new(WireFormat::OpenAi, "");
        assert_eq!(openai_ids.call_id("", "", 2), "call_0_2");
        assert_eq!(openai_ids.call_id("fc-1", "", 2), "fc-1");
        assert_eq!(openai_ids.message_id(""), "chatcmpl-0");
    }

    #[test]
    fn made_up_ids_fit_openai_for_the_gateways_request_ids() {
        let seed = "req_019ad3f2c7e14b5a9c0d8e7f6a5b4c3d";
        for client in [WireFormat::Anthropic, WireFormat::OpenAi] {
            let ids = IdGen::new(client, seed);
            // The last call a stream may make (`MAX_TOOL_CALLS`).
            let id = ids.call_id("", "", 1023);
            assert!(
                id.len() <= OPENAI_ID_MAX,
                "{id} has {} characters",
                id.len()
            );
            assert!(id.ends_with("8e7f6a5b4c3d_1023"), "{id}");
            // Two requests differing only in their random tail get different ids.
            let other = IdGen::new(client, "req_019ad3f2c7e14b5a9c0d8e7f6a5b4c3e");
            assert_ne!(other.call_id("", "", 0), ids.call_id("", "", 0));
        }
        // The message id keeps the whole request id.
        assert_eq!(
            IdGen::new(WireFormat::Anthropic, seed).message_id(""),
            "msg_req019ad3f2c7e14b5a9c0d8e7f6a5b4c3d"
        );
    }

    #[test]
    fn ids_sent_to_openai_upstreams_fit_40_characters() {
        let ids = IdGen::new(WireFormat::Anthropic, "abc");
        let signed = ids.call_id("", &"QUJD".repeat(50), 0);
        assert!(signed.len() > OPENAI_ID_MAX);
        assert_eq!(upstream_openai_id(signed), "toolu_abc_0");
        let long = "x".repeat(64);
        let short = upstream_openai_id(long.clone());
        assert_eq!(short.len(), OPENAI_ID_MAX);
        assert!(short.starts_with("call_"));
        assert_eq!(short, upstream_openai_id(long), "stable");
        assert_eq!(upstream_openai_id("call_1".into()), "call_1");
    }

    #[test]
    fn signatures_survive_the_round_trip_through_an_id() {
        let ids = IdGen::new(WireFormat::Anthropic, "abc");
        for sig in ["CiQB0e2Kb+/x==", "AAAA", "a/b+c", "Zg="] {
            let id = ids.call_id("", sig, 3);
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{id}"
            );
            let back = signature_of(&id).unwrap();
            assert_eq!(
                back.trim_end_matches('='),
                sig.trim_end_matches('='),
                "{id}"
            );
            assert_eq!(back.len() % 4, 0);
        }
        assert_eq!(signature_of("toolu_abc_0"), None);
        assert_eq!(ids.call_id("", "not base64!", 0), "toolu_abc_0");
        // Gemini's own id with `__` cannot fake the marker.
        let id = ids.call_id("x__ts__y", "QUJD", 0);
        assert_eq!(signature_of(&id).as_deref(), Some("QUJD"));
    }
}
