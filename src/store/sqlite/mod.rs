//! The SQLite backend of the store (the default, one process): connection setup and
//! migrations (`schema`), the one writer thread (`writer`) and the sessions it folds
//! (`batch_fold`), the read-side SQL (`queries`), retention rounds (`prune`) and the
//! full-disk state (`space`).

pub(super) mod batch_fold;
pub(super) mod prune;
pub(super) mod queries;
pub(super) mod schema;
pub(super) mod space;
pub(super) mod writer;
