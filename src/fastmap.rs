//! The map of the request path's lookups by name (clients, routes, models, limit subjects,
//! meters, upstream hosts): std's `HashMap` with foldhash's seeded hasher instead of
//! SipHash, whose 150–400 instructions a lookup added up to about 2k a short request.
//!
//! Each map draws its seed from a per-process random one (as hashbrown's own default
//! does), so an outsider cannot pick colliding keys ahead of time; the keys that can come
//! from outside (a client's address, a model name) are only ever looked up, or counted
//! under a bound, before they are inserted.

/// `HashMap` with the fast seeded hasher; build one with `FastMap::default()`.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
