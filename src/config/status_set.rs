//! `StatusSet`: a set of HTTP status codes parsed from `"429,500-503,5xx"` (R4.4).
//!
//! (placeholder API; the parser lands with the config module)

/// A set of status codes 100..=599 as a bitset; O(1) membership.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct StatusSet {
    bits: [u64; 10],
}

impl StatusSet {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parse a comma-separated list of codes (`429`), ranges (`500-503`) and classes (`5xx`).
    pub fn parse(_s: &str) -> Result<Self, String> {
        Err("not implemented".into())
    }

    pub fn insert(&mut self, code: u16) {
        if code < 640 {
            self.bits[(code / 64) as usize] |= 1 << (code % 64);
        }
    }

    pub fn contains(&self, code: u16) -> bool {
        code < 640 && self.bits[(code / 64) as usize] & (1 << (code % 64)) != 0
    }
}

impl std::fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StatusSet(..)")
    }
}
