//! The SQLite backend of the store (the default, one process): connection setup and
//! migrations (`schema`), the one writer thread (`writer`), the read-side SQL (`queries`),
//! retention rounds (`prune`) and the full-disk state (`space`).

pub(super) mod prune;
pub(super) mod queries;
pub(super) mod schema;
pub(super) mod space;
pub(super) mod writer;
