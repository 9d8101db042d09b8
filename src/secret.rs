//! `Secret`: an upstream or client key whose Debug/Display never show the value (R14.4).

use std::fmt;

/// A secret string. Debug and Display print `***`; the value is reachable only
/// through [`Secret::expose`], whose call sites are the places that put a key on the wire.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The raw value. Only the upstream request builder and key comparison call this.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
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
        if s.0.len() >= 6 && out.contains(s.expose()) {
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
    fn scrub_removes_known_secrets() {
        let s = Secret::new("sk-canary-123456");
        let t = scrub("Incorrect API key provided: sk-canary-123456.", &[s]);
        assert_eq!(t, "Incorrect API key provided: ***.");
    }
}
