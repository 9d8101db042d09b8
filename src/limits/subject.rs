//! Who a limit applies to — a client by name, or an upstream key by channel name and key
//! fingerprint (never positions, so state survives reloads) — and the owned map key that a
//! borrowed `Subject` looks up without allocating.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// A limited subject, borrowed from the request's strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject<'a> {
    Client(&'a str),
    /// An upstream key: its channel's name and the key's fingerprint.
    Key {
        channel: &'a str,
        key: &'a str,
    },
}

impl Subject<'_> {
    pub(crate) fn parts(&self) -> (u8, &str, &str) {
        match *self {
            Subject::Client(c) => (0, c, ""),
            Subject::Key { channel, key } => (1, channel, key),
        }
    }

    pub(crate) fn to_owned_key(self) -> OwnedSubject {
        let (tag, a, b) = self.parts();
        OwnedSubject {
            tag,
            a: a.into(),
            b: b.into(),
        }
    }
}

/// The owned form, stored as a map key.
#[derive(Debug, Clone)]
pub(crate) struct OwnedSubject {
    tag: u8,
    a: Box<str>,
    b: Box<str>,
}

/// A view both forms share, so a map keyed by `OwnedSubject` answers a `Subject` lookup.
pub(crate) trait SubjectView {
    fn view(&self) -> (u8, &str, &str);
}

impl SubjectView for OwnedSubject {
    fn view(&self) -> (u8, &str, &str) {
        (self.tag, &self.a, &self.b)
    }
}

impl SubjectView for Subject<'_> {
    fn view(&self) -> (u8, &str, &str) {
        self.parts()
    }
}

impl<'a> Borrow<dyn SubjectView + 'a> for OwnedSubject {
    fn borrow(&self) -> &(dyn SubjectView + 'a) {
        self
    }
}

impl Hash for dyn SubjectView + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view().hash(state)
    }
}

impl PartialEq for dyn SubjectView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

impl Eq for dyn SubjectView + '_ {}

// Must hash exactly as the view does (the `Borrow` contract).
impl Hash for OwnedSubject {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view().hash(state)
    }
}

impl PartialEq for OwnedSubject {
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

impl Eq for OwnedSubject {}
