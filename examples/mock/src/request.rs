//! What the mock upstream reads from a request: which endpoint, and the few body fields
//! (model, stream, include_usage, input count) its answers depend on.
use std::borrow::Cow;
use std::fmt;

use http::Method;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

/// The model echoed when the request names none.
pub const DEFAULT_MODEL: &str = "mock-model";

/// The endpoint a request addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Chat,
    Completions,
    Embeddings,
    Moderations,
    Responses,
    Messages,
    /// Anthropic's `/v1/messages/count_tokens`.
    CountTokens,
    Images,
    Speech,
    Transcriptions,
    Models,
    VideoCreate,
    VideoGet,
    /// Gemini `models/{model}:generateContent` (`stream: false`) or
    /// `:streamGenerateContent` (`stream: true`), under any version prefix.
    Gemini {
        stream: bool,
    },
    /// Any other `/v1/*` path: echoed back.
    Echo,
    /// Outside `/v1/`.
    NotFound,
}

impl Endpoint {
    /// The endpoint of `path`. Azure OpenAI's `/openai/deployments/{deployment}/X` is the
    /// OpenAI endpoint `/v1/X`; Gemini's methods are recognised under any prefix.
    pub(crate) fn classify(method: &Method, path: &str) -> Endpoint {
        if let Some(stream) = super::gemini::method_of(path) {
            return if method == Method::POST {
                Endpoint::Gemini { stream }
            } else {
                Endpoint::NotFound
            };
        }
        let rest = match azure_rest(path) {
            Some(r) => r,
            None => match path.strip_prefix("/v1/") {
                Some(r) => r,
                None => return Endpoint::NotFound,
            },
        };
        let post = method == Method::POST;
        let get = method == Method::GET;
        match rest {
            "chat/completions" if post => Endpoint::Chat,
            "completions" if post => Endpoint::Completions,
            "embeddings" if post => Endpoint::Embeddings,
            "moderations" if post => Endpoint::Moderations,
            "responses" if post => Endpoint::Responses,
            "messages" if post => Endpoint::Messages,
            "messages/count_tokens" if post => Endpoint::CountTokens,
            "images/generations" if post => Endpoint::Images,
            "audio/speech" if post => Endpoint::Speech,
            "audio/transcriptions" if post => Endpoint::Transcriptions,
            "models" if get => Endpoint::Models,
            "videos" if post => Endpoint::VideoCreate,
            r if get && r.starts_with("videos/") && !r[7..].is_empty() && !r[7..].contains('/') => {
                Endpoint::VideoGet
            }
            _ => Endpoint::Echo,
        }
    }

    pub(crate) fn gemini(self) -> bool {
        matches!(self, Endpoint::Gemini { .. })
    }

    /// Whether the endpoint answers with SSE when asked to stream.
    pub(crate) fn streamable(self) -> bool {
        matches!(
            self,
            Endpoint::Chat | Endpoint::Completions | Endpoint::Responses | Endpoint::Messages
        )
    }

    /// Whether errors use the Anthropic wire format.
    pub(crate) fn anthropic(self) -> bool {
        matches!(self, Endpoint::Messages | Endpoint::CountTokens)
    }
}

/// The OpenAI path under an Azure deployment: `/openai/deployments/d/chat/completions` →
/// `chat/completions`.
pub(crate) fn azure_rest(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/openai/deployments/")?;
    let (deployment, rest) = rest.split_once('/')?;
    (!deployment.is_empty()).then_some(rest)
}

/// The request body fields the answers depend on.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ReqInfo<'a> {
    #[serde(borrow, default)]
    pub model: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub input: Option<InputCount>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default, deserialize_with = "lenient_bool")]
    pub include_usage: bool,
}

/// How many inputs an embeddings request carries (1 unless `input` is an array of inputs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputCount(pub usize);

impl<'de> Deserialize<'de> for InputCount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = InputCount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an input")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<InputCount, A::Error> {
                // An array of token ids is one input; an array of strings or arrays is many.
                let mut n = 0usize;
                let mut all_numbers = true;
                while let Some(item) = seq.next_element::<Item>()? {
                    all_numbers &= matches!(item, Item::Number);
                    n += 1;
                }
                Ok(InputCount(if all_numbers { 1 } else { n.max(1) }))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<InputCount, E> {
                Ok(InputCount(1))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<InputCount, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(InputCount(1))
            }
        }
        d.deserialize_any(V)
    }
}

enum Item {
    Number,
    Other,
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("anything")
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Item, E> {
                Ok(Item::Number)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Item, E> {
                Ok(Item::Number)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Item, E> {
                Ok(Item::Number)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Item, E> {
                Ok(Item::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Item, E> {
                Ok(Item::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Item, E> {
                Ok(Item::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Item, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Item::Other)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<Item, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Item::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// `true` only for a JSON `true`; anything else (null, strings, numbers) is `false`.
fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("anything")
        }
        fn visit_bool<E: de::Error>(self, b: bool) -> Result<bool, E> {
            Ok(b)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<bool, A::Error> {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            Ok(false)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<bool, A::Error> {
            while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(false)
        }
    }
    d.deserialize_any(V)
}

impl<'a> ReqInfo<'a> {
    /// Reads the body; a body that is not a JSON object yields the defaults. For multipart
    /// bodies (audio transcriptions) the `model` form field is picked out.
    pub(crate) fn parse(body: &'a [u8]) -> ReqInfo<'a> {
        if body.first().is_some_and(|b| *b == b'{')
            || body.first().is_some_and(|b| b.is_ascii_whitespace())
        {
            if let Ok(info) = serde_json::from_slice::<ReqInfo<'a>>(body) {
                return info;
            }
        }
        ReqInfo {
            model: multipart_model(body).map(Cow::Borrowed),
            ..ReqInfo::default()
        }
    }

    pub(crate) fn model(&self) -> &str {
        self.model.as_deref().unwrap_or(DEFAULT_MODEL)
    }

    pub(crate) fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }
}

/// Finds the value of a `name="model"` part in a multipart/form-data body.
fn multipart_model(body: &[u8]) -> Option<&str> {
    const NEEDLE: &[u8] = b"name=\"model\"";
    let at = body.windows(NEEDLE.len()).position(|w| w == NEEDLE)?;
    let rest = &body[at + NEEDLE.len()..];
    let start = rest.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let value = &rest[start..];
    let end = value.windows(2).position(|w| w == b"\r\n")?;
    std::str::from_utf8(&value[..end])
        .ok()
        .filter(|s| !s.is_empty())
}
