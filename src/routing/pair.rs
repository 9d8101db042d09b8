//! Allocation-free lookups in the table's maps keyed by `(String, String)`: a request looks
//! up `(group, model)` and `(group, path)` with borrowed `&str`s instead of building two
//! owned strings per lookup (a performance measure).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Two strings, owned (the map's key) or borrowed (the lookup).
pub trait Pair {
    fn parts(&self) -> (&str, &str);
}

impl Pair for (String, String) {
    fn parts(&self) -> (&str, &str) {
        (&self.0, &self.1)
    }
}

impl Pair for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn Pair + 'a> for (String, String) {
    fn borrow(&self) -> &(dyn Pair + 'a) {
        self
    }
}

/// Hashes exactly as `(String, String)` does (each part in order, as `str`), so a borrowed
/// pair finds the owned key.
impl Hash for dyn Pair + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let (a, b) = self.parts();
        a.hash(h);
        b.hash(h);
    }
}

impl PartialEq for dyn Pair + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Pair + '_ {}

/// The lookup key for `(a, b)` in a `HashMap<(String, String), _>`.
pub fn key<'k>(pair: &'k (&'k str, &'k str)) -> &'k (dyn Pair + 'k) {
    pair
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::key;

    #[test]
    fn borrowed_pairs_find_owned_keys_and_only_them() {
        let mut m: HashMap<(String, String), u32> = HashMap::new();
        m.insert(("default".into(), "gpt-4o".into()), 1);
        m.insert(("ab".into(), "c".into()), 2);
        m.insert((String::new(), "/v1/x".into()), 3);
        assert_eq!(m.get(key(&("default", "gpt-4o"))), Some(&1));
        assert_eq!(m.get(key(&("ab", "c"))), Some(&2));
        assert_eq!(m.get(key(&("", "/v1/x"))), Some(&3));
        // The same bytes split differently are another key.
        assert_eq!(m.get(key(&("a", "bc"))), None);
        assert_eq!(m.get(key(&("default", "gpt-4"))), None);
        assert_eq!(m.get(key(&("gpt-4o", "default"))), None);
    }
}
