//! Tool-call and message ids the translator makes up, and Gemini thought signatures carried
//! inside tool-call ids.
//!
//! Gemini returns function calls without ids (or with ids of its own); a client needs one per
//! call to match its results. The id is `call_<seed>_<n>` (`toolu_<seed>_<n>` for Anthropic
//! clients): `seed` is the gateway's request id (letters and digits only), `n` the call's
//! position in the answer. Nothing is stored: a tool result coming back is matched to its call
//! by the call in the client's history (Gemini matches results by function name).
//!
//! Gemini 3 requires the `thoughtSignature` of a function call back with the call in the next
//! request. It is appended to the id as `__ts__<base64url>` (the id stays within Anthropic's
//! `[a-zA-Z0-9_-]`), and the request writer puts it back on the `functionCall` part.

use super::Format;

/// The id marker before a carried thought signature. Ids made here never contain `__` before it.
const SIG_MARKER: &str = "__ts__";

/// What Gemini documents for function calls whose signature is unknown (history written by
/// another model).
pub(crate) const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Makes ids for one answer.
#[derive(Debug, Clone)]
pub(crate) struct IdGen {
    client: Format,
    seed: String,
}

impl IdGen {
    pub fn new(client: Format, seed: &str) -> Self {
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
                Format::Anthropic => "toolu_",
                _ => "call_",
            };
            format!("{prefix}{}_{n}", self.seed)
        } else if self.client == Format::Anthropic || !signature.is_empty() {
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
        } else if self.client == Format::Anthropic && !id.bytes().all(ok) {
            safe(id)
        } else {
            id.to_string()
        }
    }

    /// The answer's id: the upstream's, or a made-up one in the client's style.
    pub fn message_id(&self, upstream: &str) -> String {
        match (upstream.is_empty(), self.client) {
            (false, _) => upstream.to_string(),
            (true, Format::Anthropic) => format!("msg_{}", self.seed),
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
    while sig.len() % 4 != 0 {
        sig.push('=');
    }
    Some(sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_ids_are_unique_per_call_and_anthropic_safe() {
        let g = IdGen::new(Format::Anthropic, "req-7f3a:b");
        assert_eq!(g.call_id("", "", 0), "toolu_req7f3ab_0");
        assert_eq!(g.call_id("", "", 1), "toolu_req7f3ab_1");
        assert_eq!(g.call_id("call.x:y", "", 0), "call_x_y");
        let o = IdGen::new(Format::OpenAi, "");
        assert_eq!(o.call_id("", "", 2), "call_0_2");
        assert_eq!(o.call_id("fc-1", "", 2), "fc-1");
        assert_eq!(o.message_id(""), "chatcmpl-0");
    }

    #[test]
    fn signatures_survive_the_round_trip_through_an_id() {
        let g = IdGen::new(Format::Anthropic, "abc");
        for sig in ["CiQB0e2Kb+/x==", "AAAA", "a/b+c", "Zg="] {
            let id = g.call_id("", sig, 3);
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
        assert_eq!(g.call_id("", "not base64!", 0), "toolu_abc_0");
        // Gemini's own id with `__` cannot fake the marker.
        let id = g.call_id("x__ts__y", "QUJD", 0);
        assert_eq!(signature_of(&id).as_deref(), Some("QUJD"));
    }
}
