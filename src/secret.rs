//! `Secret`: an upstream or client key whose Debug/Display never show the value (R14.4).

use std::fmt;
use std::sync::OnceLock;

use http::HeaderValue;

/// A secret string. Debug and Display print `***`; the value is reachable only
/// through [`Secret::expose`], whose call sites are the places that put a key on the wire.
#[derive(Clone, Default)]
pub struct Secret {
    value: String,
    /// The key as a sensitive header value, bare and as `Bearer <key>`: built on first use
    /// and kept with the key (it lives as long as the config generation), so a request
    /// clones a header value instead of formatting and validating one. `None`:
    /// the key cannot be a header value.
    bare: OnceLock<Option<HeaderValue>>,
    bearer: OnceLock<Option<HeaderValue>>,
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for Secret {}

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret {
            value: value.into(),
            ..Secret::default()
        }
    }

    /// The raw value. Only the upstream request builder and key comparison call this.
    pub fn expose(&self) -> &str {
        &self.value
    }

    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// The key as a sensitive header value; `None` when it cannot be one.
    pub fn header_value(&self) -> Option<HeaderValue> {
        self.bare
            .get_or_init(|| sensitive(HeaderValue::try_from(self.value.as_str())))
            .clone()
    }

    /// `Bearer <key>` as a sensitive header value; `None` when it cannot be one.
    pub fn bearer_value(&self) -> Option<HeaderValue> {
        self.bearer
            .get_or_init(|| sensitive(HeaderValue::try_from(format!("Bearer {}", self.value))))
            .clone()
    }
}

fn sensitive<E>(v: Result<HeaderValue, E>) -> Option<HeaderValue> {
    let mut v = v.ok()?;
    v.set_sensitive(true);
    Some(v)
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Replace every occurrence of any of `secrets` (non-trivial ones only) in `text` with `***`.
pub fn scrub(text: &str, secrets: &[Secret]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if s.value.len() >= 6 && out.contains(s.expose()) {
            out = out.replace(s.expose(), "***");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_redact() {
        let s = Secret::new("sk-canary-123456");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(s.expose(), "sk-canary-123456");
    }

    #[test]
    fn header_values_are_sensitive_and_refuse_bad_keys() {
        let s = Secret::new("sk-canary-123456");
        for _ in 0..2 {
            let bearer = s.bearer_value().expect("a valid key");
            assert_eq!(bearer.as_bytes(), b"Bearer sk-canary-123456");
            assert!(bearer.is_sensitive());
            let bare = s.header_value().expect("a valid key");
            assert_eq!(bare.as_bytes(), b"sk-canary-123456");
            assert!(bare.is_sensitive());
        }
        let bad = Secret::new("sk-line\nbreak");
        assert!(bad.bearer_value().is_none() && bad.header_value().is_none());
        // A clone made before first use and one made after carry the same value.
        assert_eq!(
            s.clone().bearer_value(),
            Secret::new("sk-canary-123456").bearer_value()
        );
    }

    #[test]
    fn scrub_removes_known_secrets() {
        let s = Secret::new("sk-canary-123456");
        let t = scrub("Incorrect API key provided: sk-canary-123456.", &[s]);
        assert_eq!(t, "Incorrect API key provided: ***.");
    }
}
