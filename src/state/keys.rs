//! Key fingerprints (R7.1, R7.2): the stable identity of an upstream key in runtime and
//! persisted state, so that a disabled key stays disabled wherever it moves in the list and
//! a removed key takes its state with it.
//!
//! A fingerprint is the first 128 bits of SHA-256 over a fixed domain prefix and the key.
//! SQLite stores it in hex and the admin API shows its first 12 digits; the key itself is
//! never stored or shown. Fingerprints are computed once per table, in
//! [`super::Snapshot::new`].

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::secret::Secret;

const DOMAIN: &[u8] = b"switchyard key fingerprint v1\0";

/// The fingerprint of one upstream key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyFp([u8; 16]);

impl KeyFp {
    pub fn of(key: &Secret) -> KeyFp {
        let mut hasher = Sha256::new();
        hasher.update(DOMAIN);
        hasher.update(key.expose().as_bytes());
        let digest = hasher.finalize();
        let mut fp = [0u8; 16];
        fp.copy_from_slice(&digest[..16]);
        KeyFp(fp)
    }

    /// 32 hex digits: the stored form.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The stored form back; `None` for anything that is not 32 hex digits.
    pub fn parse(s: &str) -> Option<KeyFp> {
        let bytes = hex::decode(s).ok()?;
        Some(KeyFp(bytes.try_into().ok()?))
    }

    /// The first 12 hex digits: what the admin API and logs show.
    pub fn short(&self) -> String {
        hex::encode(&self.0[..6])
    }
}

impl fmt::Debug for KeyFp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyFp({})", self.short())
    }
}

impl fmt::Display for KeyFp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.short())
    }
}

/// The fingerprints of a channel's keys, in key order.
pub fn fingerprints(keys: &[Secret]) -> Arc<[KeyFp]> {
    keys.iter().map(KeyFp::of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_distinct_and_round_trips() {
        let a = KeyFp::of(&Secret::new("sk-a"));
        assert_eq!(a, KeyFp::of(&Secret::new("sk-a")), "stable");
        assert_ne!(a, KeyFp::of(&Secret::new("sk-b")));
        assert_eq!(KeyFp::parse(&a.hex()), Some(a));
        assert_eq!(a.hex().len(), 32);
        assert!(!a.hex().contains("sk-a"));
        assert_eq!(KeyFp::parse("#1"), None);
        assert_eq!(KeyFp::parse("abcd"), None, "too short");
        assert_eq!(format!("{a}"), a.hex()[..12]);
    }
}
