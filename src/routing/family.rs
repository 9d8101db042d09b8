//! Path families and the retry-safety matrix (R10.1, R10.2).
//!
//! A request that generates and bills an artifact is not replayed by default;
//! an `Idempotency-Key` reopens retries for every such family except images. A
//! `responses` request is replayed without a key after a rejection that generated nothing
//! (`pre_generation`: 429, 503, 529, a connection that never carried the request).

use crate::config::model::{Channel, ChannelKind, ResponsesMode};
use crate::routing::outcome::Outcome;

/// What kind of endpoint a request path addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PathFamily {
    Chat,
    Completions,
    Embeddings,
    Moderations,
    Messages,
    /// `/v1/messages/count_tokens`, `/v1/responses/input_tokens`: free, never billed.
    TokenCount,
    Responses,
    Images,
    Audio,
    Video,
    Music,
    Models,
    /// Any other path, asked with GET, HEAD, OPTIONS or PUT (safe to replay).
    Custom,
    /// Any other path, asked with another method (POST, PATCH, DELETE): replayed only
    /// with an `Idempotency-Key` (pass-through rule).
    CustomWrite,
}

impl PathFamily {
    /// R1.1: the endpoint families routed by the `model` of the body. Every other path
    /// reaches only channels that declare it (`channels.*.paths`, `tasks.paths`).
    pub fn routed_by_model(self) -> bool {
        matches!(
            self,
            PathFamily::Chat
                | PathFamily::Completions
                | PathFamily::Embeddings
                | PathFamily::Moderations
                | PathFamily::Messages
                | PathFamily::TokenCount
                | PathFamily::Responses
                | PathFamily::Images
                | PathFamily::Audio
        )
    }

    /// The families whose body is always a JSON object (R1.1): a request to one of them
    /// whose `Content-Type` is not JSON has no model the gateway could read. Images and
    /// audio also take multipart bodies (edits, transcriptions), routed by path.
    pub fn json_only(self) -> bool {
        self.routed_by_model() && !matches!(self, PathFamily::Images | PathFamily::Audio)
    }

    /// Whether requests of this family are charged to the client's quota (R11.1): token
    /// counting is free at every provider, so it is neither precharged nor billed.
    pub fn billed(self) -> bool {
        self != PathFamily::TokenCount
    }
}

/// Whether a channel of `kind` may serve a request of `family` on `path` (R16.1). Chat
/// Completions and Messages reach a channel of the other wire format only translated, so
/// only with `translate` on (a `gemini` channel speaks neither and is always translated).
/// Token counting (`/v1/messages/count_tokens`, `/v1/responses/input_tokens`) is not
/// translated: it reaches channels of its own format only. Every other family reaches
/// OpenAI, Azure and Anthropic channels as before, never Gemini.
pub fn channel_serves(family: PathFamily, path: &str, kind: ChannelKind, translate: bool) -> bool {
    let openai_format = matches!(kind, ChannelKind::OpenAi | ChannelKind::Azure);
    match family {
        PathFamily::Chat => openai_format || translate,
        PathFamily::Messages => kind == ChannelKind::Anthropic || translate,
        PathFamily::TokenCount if path.contains("count_tokens") => kind == ChannelKind::Anthropic,
        PathFamily::TokenCount => openai_format,
        _ => kind != ChannelKind::Gemini,
    }
}

/// Whether `ch` may serve a request of `family` on `path`: [`channel_serves`], with the
/// channel's `responses` mode for the Responses API (R16.4). Creating a response
/// (`/v1/responses`) reaches `openai` and `azure` channels (native or, with `responses:
/// chat`, translated) and, translated, `anthropic` and `gemini` ones with `translate` on;
/// the other Responses paths (`/v1/responses/{id}`, `.../cancel`) read state kept by the
/// upstream, so only OpenAI-format channels that serve Responses natively. `none`: never.
pub fn serves(family: PathFamily, path: &str, ch: &Channel) -> bool {
    if family != PathFamily::Responses {
        return channel_serves(family, path, ch.kind, ch.translate);
    }
    let openai_format = matches!(ch.kind, ChannelKind::OpenAi | ChannelKind::Azure);
    let create = path.split(['?', '#']).next() == Some("/v1/responses");
    match ch.responses {
        ResponsesMode::Off => false,
        _ if openai_format => create || ch.responses != ResponsesMode::Chat,
        _ => create && ch.translate,
    }
}

/// The family of a request by its (normalised) path and method: [`family_of_path`], with
/// pass-through paths split by whether the method is safe to replay.
pub fn family_of(path: &str, method: &http::Method) -> PathFamily {
    match family_of_path(path) {
        PathFamily::Custom if !safe_method(method) => PathFamily::CustomWrite,
        f => f,
    }
}

/// GET, HEAD, OPTIONS and PUT: the methods a pass-through request may be replayed with.
pub fn safe_method(m: &http::Method) -> bool {
    matches!(
        *m,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS | http::Method::PUT
    )
}

/// Classify a request path (query string ignored; the `/v1` prefix is optional).
///
/// `/v1/chat/completions` → Chat, `/v1/images/generations` → Images,
/// `/v1/videos/...` and `/v1/video/...` → Video, `/v1/messages/count_tokens` → TokenCount.
/// Chat, completions, embeddings, moderations and messages are exact paths; anything else
/// (`/v1/chat/completions/{id}`, `/v1/messages/batches`) → Custom.
pub fn family_of_path(path: &str) -> PathFamily {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let rest = path.trim_start_matches('/');
    let rest = match rest.strip_prefix("v1") {
        Some(r) if r.is_empty() || r.starts_with('/') => r.trim_start_matches('/'),
        _ => rest,
    };
    let mut segs = rest.split('/');
    let first = segs.next().unwrap_or("");
    let second = segs.next();
    let exact = segs.next().is_none();
    match (first, second) {
        ("chat", Some("completions")) if exact => PathFamily::Chat,
        ("completions", None) => PathFamily::Completions,
        ("embeddings", None) => PathFamily::Embeddings,
        ("moderations", None) => PathFamily::Moderations,
        ("messages", None) => PathFamily::Messages,
        ("messages", Some("count_tokens")) | ("responses", Some("input_tokens")) if exact => {
            PathFamily::TokenCount
        }
        ("responses", _) => PathFamily::Responses,
        ("images", _) => PathFamily::Images,
        ("audio", _) => PathFamily::Audio,
        ("videos" | "video", _) => PathFamily::Video,
        ("music", _) => PathFamily::Music,
        ("models", _) => PathFamily::Models,
        _ => PathFamily::Custom,
    }
}

/// The R10.1 matrix: may a failed attempt of this family be replayed?
pub fn retryable(family: PathFamily, has_idempotency_key: bool) -> bool {
    match family {
        PathFamily::Images => false,
        PathFamily::Audio
        | PathFamily::Video
        | PathFamily::Music
        | PathFamily::Responses
        | PathFamily::CustomWrite => has_idempotency_key,
        PathFamily::Chat
        | PathFamily::Completions
        | PathFamily::Embeddings
        | PathFamily::Moderations
        | PathFamily::Messages
        | PathFamily::TokenCount
        | PathFamily::Models
        | PathFamily::Custom => true,
    }
}

/// R10.1: did this failed attempt generate nothing? A 429, 503 or 529 (after the channel's
/// status mapping) rejects the request before generation; so does a connection that never
/// carried it (refused, DNS, TLS) and a channel error (no key, an unbuildable request: nothing
/// was sent). A reset, a timeout after send or a 500 are ambiguous: the upstream may have
/// generated (and billed) an answer.
pub fn pre_generation(o: &Outcome) -> bool {
    match o {
        Outcome::Status { code, .. } => matches!(code, 429 | 503 | 529),
        Outcome::Transport(k) => k.is_pre_send(),
        Outcome::ChannelError(_) => true,
        _ => false,
    }
}

/// The R10.1 matrix for one failed attempt: [`retryable`], and for `responses` also any
/// [`pre_generation`] rejection without a key (Codex never sends one).
pub fn replayable(family: PathFamily, has_idempotency_key: bool, o: &Outcome) -> bool {
    retryable(family, has_idempotency_key) || (family == PathFamily::Responses && pre_generation(o))
}

/// R10.1 for a request path: [`family_of_path`] then [`retryable`].
pub fn path_retryable(path: &str, has_idempotency_key: bool) -> bool {
    retryable(family_of_path(path), has_idempotency_key)
}

/// R10.2: is this attempt at the request's first target, where the client's own
/// `Idempotency-Key` goes as it is?
///
/// A "target" here is what the upstream sees as the same request: the same
/// channel with the same upstream model, i.e. a byte-identical body. Same-target
/// retries and the channel's next key carry the same key (keys of one channel
/// usually share the upstream's dedupe scope, and dropping the header there would
/// turn a safe replay into a second charge). Another target gets a body of its own,
/// so the client's key would be a conflict (or a false dedupe) there: it gets
/// [`derived_idempotency_key`] instead, on every attempt.
pub fn forward_idempotency_key(first: (usize, &str), channel: usize, upstream_model: &str) -> bool {
    first.0 == channel && first.1 == upstream_model
}

/// R10.2: the key every attempt at a target other than the first carries, so
/// that target can deduplicate its own retries: `<key>:<channel>/<upstream model>`, or —
/// when that is not a valid key (over 255 bytes, or not visible ASCII) — `<key>:` and 16 hex
/// digits of the target's SHA-256, cut to fit. Stable: the same target always gets the same.
pub fn derived_idempotency_key(key: &[u8], channel: &str, upstream_model: &str) -> Vec<u8> {
    let mut plain = key.to_vec();
    plain.push(b':');
    plain.extend_from_slice(channel.as_bytes());
    plain.push(b'/');
    plain.extend_from_slice(upstream_model.as_bytes());
    if valid_idempotency_key(&plain) {
        return plain;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{channel}\0{upstream_model}").as_bytes());
    let tail = format!(":{}", &hex::encode(digest)[..16]);
    let mut out = key[..key.len().min(255 - tail.len())].to_vec();
    out.extend_from_slice(tail.as_bytes());
    out
}

/// R10.2: an `Idempotency-Key` counts only if it is 1..=255 visible ASCII bytes.
pub fn valid_idempotency_key(v: &[u8]) -> bool {
    (1..=255).contains(&v.len()) && v.iter().all(|b| (0x21..=0x7e).contains(b))
}

#[cfg(test)]
mod tests {
    use super::PathFamily::*;
    use super::*;

    #[test]
    fn every_path_has_its_family() {
        let table: &[(&str, PathFamily)] = &[
            ("/v1/chat/completions", Chat),
            ("/v1/completions", Completions),
            ("/v1/embeddings", Embeddings),
            ("/v1/moderations", Moderations),
            ("/v1/messages", Messages),
            ("/v1/messages?beta=true", Messages),
            ("/v1/messages/count_tokens", TokenCount),
            ("/v1/responses/input_tokens", TokenCount),
            ("/v1/messages/batches", Custom),
            ("/v1/chat/other", Custom),
            ("/v1/chat", Custom),
            ("/v1/chat/completions/chatcmpl-1", Custom),
            ("/v1/embeddings/x", Custom),
            ("/v1/responses", Responses),
            ("/v1/responses/resp_1/cancel", Responses),
            ("/v1/images/generations", Images),
            ("/v1/images/edits", Images),
            ("/v1/audio/speech", Audio),
            ("/v1/audio/transcriptions", Audio),
            ("/v1/videos/generations", Video),
            ("/v1/video/submit", Video),
            ("/v1/music/generate", Music),
            ("/v1/models", Models),
            ("/v1/systemone", Custom),
            ("/v1", Custom),
            ("/v1images/x", Custom),
            ("/chat/completions", Chat),
            ("", Custom),
        ];
        for (p, f) in table {
            assert_eq!(family_of_path(p), *f, "{p}");
        }
    }

    /// R10.1: `responses` fails over without a key only when nothing was generated.
    #[test]
    fn responses_replay_pre_generation_rejections_without_a_key() {
        use crate::routing::outcome::TransportKind::*;
        let st = |code| Outcome::Status {
            code,
            error_code: None,
            error_type: None,
            message: String::new(),
        };
        // (outcome, replayed without a key)
        let rows = [
            (st(429), true),
            (st(503), true),
            (st(529), true),
            (Outcome::Transport(Connect), true),
            (Outcome::Transport(Dns), true),
            (Outcome::Transport(Tls), true),
            (
                Outcome::ChannelError(crate::routing::outcome::ChannelFault::KeyHeldBack(
                    "channel:no_available_key".into(),
                )),
                true,
            ),
            (st(500), false),
            (st(502), false),
            (st(504), false),
            (Outcome::Transport(Reset), false),
            (Outcome::Transport(HeaderTimeout), false),
            (Outcome::Transport(FirstByteTimeout), false),
            (Outcome::Transport(BodyTimeout), false),
            (Outcome::Transport(Broken), false),
            (Outcome::Transport(EmptyBody), false),
        ];
        for (o, plain) in rows {
            assert_eq!(replayable(Responses, false, &o), plain, "{o:?}");
            assert!(replayable(Responses, true, &o), "{o:?} with a key");
            // Every other family keeps its own rule whatever the outcome.
            assert!(!replayable(Images, true, &o), "{o:?}");
            assert!(!replayable(Audio, false, &o), "{o:?}");
            assert!(replayable(Chat, false, &o), "{o:?}");
            assert!(replayable(Messages, false, &o), "{o:?}");
        }
    }

    #[test]
    fn r10_1_matrix() {
        // (family, default, with Idempotency-Key)
        let table: &[(PathFamily, bool, bool)] = &[
            (Images, false, false),
            (Audio, false, true),
            (Video, false, true),
            (Music, false, true),
            (Responses, false, true),
            (Chat, true, true),
            (Completions, true, true),
            (Embeddings, true, true),
            (Moderations, true, true),
            (Messages, true, true),
            (TokenCount, true, true),
            (Models, true, true),
            (Custom, true, true),
            (CustomWrite, false, true),
        ];
        for &(f, plain, keyed) in table {
            assert_eq!(retryable(f, false), plain, "{f:?} default");
            assert_eq!(retryable(f, true), keyed, "{f:?} keyed");
        }
    }

    /// Seed 004: pass-through requests replay only with a safe method or a key.
    #[test]
    fn pass_through_retries_follow_the_method() {
        use http::Method;
        for (m, fam) in [
            (Method::GET, Custom),
            (Method::HEAD, Custom),
            (Method::OPTIONS, Custom),
            (Method::PUT, Custom),
            (Method::POST, CustomWrite),
            (Method::PATCH, CustomWrite),
            (Method::DELETE, CustomWrite),
        ] {
            assert_eq!(family_of("/v1/assistants", &m), fam, "{m}");
        }
        // Known families keep their own rule whatever the method.
        assert_eq!(family_of("/v1/chat/completions", &Method::POST), Chat);
        assert!(!retryable(CustomWrite, false));
        assert!(retryable(CustomWrite, true));
    }

    #[test]
    fn only_the_r1_1_families_route_by_model() {
        for f in [
            Chat,
            Completions,
            Embeddings,
            Moderations,
            Messages,
            TokenCount,
            Responses,
            Images,
            Audio,
        ] {
            assert!(f.routed_by_model(), "{f:?}");
        }
        for f in [Video, Music, Models, Custom, CustomWrite] {
            assert!(!f.routed_by_model(), "{f:?}");
        }
        assert!(!TokenCount.billed());
        assert!(Messages.billed());
    }

    #[test]
    fn idempotency_key_follows_the_same_body() {
        // (first channel, first model), (channel, model) -> forwarded
        let rows = [
            ((0, "m"), (0, "m"), true),
            ((0, "m"), (1, "m"), false),
            ((0, "m"), (0, "other"), false),
            ((2, ""), (2, ""), true),
        ];
        for (first, (ch, model), want) in rows {
            assert_eq!(
                forward_idempotency_key(first, ch, model),
                want,
                "{first:?} -> {ch}/{model}"
            );
        }
    }

    /// R10.2: every other target gets a stable key of its own, valid as a key.
    #[test]
    fn other_targets_get_a_stable_derived_key() {
        let k = derived_idempotency_key(b"abc", "backup", "gpt-x");
        assert_eq!(k, b"abc:backup/gpt-x");
        assert_eq!(derived_idempotency_key(b"abc", "backup", "gpt-x"), k);
        assert_ne!(derived_idempotency_key(b"abc", "backup", "gpt-y"), k);
        let long = vec![b'k'; 255];
        for (key, ch) in [(&long[..], "backup"), (&b"abc"[..], "bäckup")] {
            let d = derived_idempotency_key(key, ch, "m");
            assert!(valid_idempotency_key(&d), "{}", String::from_utf8_lossy(&d));
            assert_eq!(d, derived_idempotency_key(key, ch, "m"));
        }
    }

    /// R16.1: chat and messages cross formats only with `translate`; token counting never.
    #[test]
    fn channels_serve_the_other_format_only_translated() {
        use ChannelKind::{Anthropic as A, Azure as Z, Gemini as G, OpenAi as O};
        let chat = "/v1/chat/completions";
        let msgs = "/v1/messages";
        let count = "/v1/messages/count_tokens";
        let input = "/v1/responses/input_tokens";
        // (family, path, kind, translate, served)
        let rows = [
            (Chat, chat, O, false, true),
            (Chat, chat, Z, false, true),
            (Chat, chat, A, true, true),
            (Chat, chat, A, false, false),
            (Chat, chat, G, true, true),
            (Chat, chat, G, false, false),
            (Messages, msgs, A, false, true),
            (Messages, msgs, O, true, true),
            (Messages, msgs, O, false, false),
            (Messages, msgs, Z, true, true),
            (Messages, msgs, G, true, true),
            (Messages, msgs, G, false, false),
            (TokenCount, count, A, true, true),
            (TokenCount, count, O, true, false),
            (TokenCount, count, G, true, false),
            (TokenCount, input, O, true, true),
            (TokenCount, input, A, true, false),
            (Embeddings, "/v1/embeddings", O, true, true),
            (Embeddings, "/v1/embeddings", Z, false, true),
            (Embeddings, "/v1/embeddings", G, true, false),
            (Custom, "/v1/files", A, false, true),
        ];
        for (f, p, k, t, want) in rows {
            assert_eq!(
                channel_serves(f, p, k, t),
                want,
                "{f:?} {p} {k:?} translate={t}"
            );
        }
    }

    /// R16.4: who serves the Responses API, by kind, `responses` mode and `translate`.
    #[test]
    fn responses_reach_channels_by_mode() {
        use crate::config::model::ChannelKind::{
            Anthropic as A, Azure as Z, Gemini as G, OpenAi as O,
        };
        use ResponsesMode::{Auto, Chat as C, Native as N, Off};
        let cfg = crate::config::load_str(
            "channels:\n  c:\n    kind: openai\n    base_url: http://x\n    models: [m]\n",
            std::path::Path::new("t.yaml"),
            &Default::default(),
        )
        .unwrap();
        let create = "/v1/responses";
        let get = "/v1/responses/resp_1";
        // (kind, mode, translate, path, served)
        let rows = [
            (O, Auto, true, create, true),
            (O, Auto, true, get, true),
            (O, N, false, create, true),
            (O, C, true, create, true),
            (O, C, true, get, false),
            (O, Off, true, create, false),
            (Z, Auto, false, create, true),
            (A, Auto, true, create, true),
            (A, Auto, false, create, false),
            (A, Auto, true, get, false),
            (A, Off, true, create, false),
            (G, Auto, true, create, true),
            (G, Auto, true, get, false),
        ];
        for (kind, mode, translate, path, want) in rows {
            let mut ch = cfg.channels[0].clone();
            (ch.kind, ch.responses, ch.translate) = (kind, mode, translate);
            assert_eq!(
                serves(Responses, path, &ch),
                want,
                "{kind:?} {mode:?} translate={translate} {path}"
            );
        }
        // Every other family keeps `channel_serves`.
        let mut ch = cfg.channels[0].clone();
        ch.responses = Off;
        assert!(serves(Chat, "/v1/chat/completions", &ch));
        ch.kind = G;
        assert!(!serves(Embeddings, "/v1/embeddings", &ch));
    }

    #[test]
    fn idempotency_key_validity() {
        assert!(valid_idempotency_key(b"abc-123_XYZ"));
        assert!(valid_idempotency_key(&[b'!'; 255]));
        assert!(valid_idempotency_key(b"~"));
        assert!(!valid_idempotency_key(b""));
        assert!(!valid_idempotency_key(&[b'a'; 256]));
        assert!(!valid_idempotency_key(b"has space"));
        assert!(!valid_idempotency_key(b"tab\t"));
        assert!(!valid_idempotency_key("é".as_bytes()));
        assert!(!valid_idempotency_key(&[0x7f]));
    }
}
