//! `TranslateError` (a request the target format cannot express: a 400 naming the field) and
//! `Path`, the allocation-free JSON path used to name that field.

use std::fmt;

/// Why a request could not be translated. Rendered by the gateway as a 400 in the client's
/// wire format; `field` is the JSON path in the client's request (`messages[2].content[0]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslateError {
    pub kind: TranslateErrorKind,
    /// JSON path of the offending field in the client's request body ("" for the body).
    pub field: String,
    /// What is wrong and what to do, e.g. "is not supported by Anthropic Messages; remove it".
    pub reason: String,
}

impl fmt::Display for TranslateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "`{}` {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for TranslateError {}

/// The two ways a request fails translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TranslateErrorKind {
    /// A refusal of the request's meaning: the field is well-formed but this target format
    /// cannot express it, and dropping it would change the answer (`n` > 1, `logprobs`, ...).
    /// Another target (a channel speaking the client's format, or another format) may serve
    /// the request: skip this one.
    Unsupported,
    /// The field does not have the shape the client's own format requires: no target can
    /// serve the request as it is.
    Invalid,
}

impl TranslateError {
    pub fn unsupported(field: impl fmt::Display, reason: impl Into<String>) -> Self {
        TranslateError {
            kind: TranslateErrorKind::Unsupported,
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    pub fn invalid(field: impl fmt::Display, reason: impl Into<String>) -> Self {
        TranslateError {
            kind: TranslateErrorKind::Invalid,
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// This target cannot carry the request's meaning, but the request itself is well-formed:
    /// the relay may skip this target and try others (a 400 only when none is left).
    pub fn refuses_meaning(&self) -> bool {
        self.kind == TranslateErrorKind::Unsupported
    }

    /// Stable machine-readable code for the error body.
    pub fn code(&self) -> &'static str {
        match self.kind {
            TranslateErrorKind::Unsupported => "untranslatable_field",
            TranslateErrorKind::Invalid => "invalid_field",
        }
    }
}

pub type Result<T, E = TranslateError> = std::result::Result<T, E>;

/// A JSON path built on the stack while walking a request; rendered only on error.
#[derive(Clone, Copy)]
pub struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Idx(usize),
}

impl<'a> Path<'a> {
    pub const ROOT: Path<'static> = Path {
        parent: None,
        seg: Seg::Root,
    };

    pub fn key(&'a self, k: &'a str) -> Path<'a> {
        Path {
            parent: Some(self),
            seg: Seg::Key(k),
        }
    }

    pub fn idx(&'a self, i: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            seg: Seg::Idx(i),
        }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = self.parent {
            p.fmt(f)?;
        }
        match self.seg {
            Seg::Root => Ok(()),
            Seg::Key(k) if self.parent.is_some_and(|p| !matches!(p.seg, Seg::Root)) => {
                write!(f, ".{k}")
            }
            Seg::Key(k) => f.write_str(k),
            Seg::Idx(i) => write!(f, "[{i}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_the_request() {
        let root = Path::ROOT;
        let messages = root.key("messages");
        let m2 = messages.idx(2);
        let content = m2.key("content");
        let c0 = content.idx(0);
        let image_url = c0.key("image_url");
        assert_eq!(image_url.to_string(), "messages[2].content[0].image_url");
        assert_eq!(root.to_string(), "");
        let error = TranslateError::unsupported(image_url, "is refused");
        assert_eq!(
            error.to_string(),
            "`messages[2].content[0].image_url` is refused"
        );
        assert_eq!(error.code(), "untranslatable_field");
        assert!(error.refuses_meaning());
        let body = TranslateError::invalid("", "request body is not valid JSON");
        assert!(!body.refuses_meaning());
        assert_eq!(body.to_string(), "request body is not valid JSON");
    }
}
