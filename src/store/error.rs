//! Store failures, and which of them mean "the database could not be reached".

use super::postgres;

/// Store failures.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("postgres: {0}")]
    Postgres(String),
    /// No answer within the timeout, or every pooled connection stayed busy (load, not an
    /// outage: only this call fails).
    #[error("database busy: {0}")]
    Busy(String),
    /// The database could not be reached (or went away mid-call).
    #[error("database unreachable: {0}")]
    Unavailable(String),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("store setup: {0}")]
    Setup(String),
    #[error("store is closed")]
    Closed,
    #[error("store task failed: {0}")]
    Task(String),
}

impl StoreError {
    /// The database could not be reached: the call may succeed later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(error: tokio_postgres::Error) -> Self {
        let text = match error.as_db_error() {
            Some(db) => format!("{error}: {}", db.message()),
            None => error.to_string(),
        };
        if postgres::unreachable(&error) {
            StoreError::Unavailable(text)
        } else {
            StoreError::Postgres(text)
        }
    }
}
