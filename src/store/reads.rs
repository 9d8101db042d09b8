//! The read side of [`Store`]: SQLite queries on the read connection, each in
//! `spawn_blocking`; PostgreSQL queries on the pool (`postgres::reads`).

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::Connection;

use super::records::{AffinityBinding, LedgerEntry, LedgerTotals, RequestRecord, StateRow};
use super::sqlite::queries;
use super::{Backend, Store, StoreError};

impl Store {
    /// Pages the database has now.
    pub async fn page_count(&self) -> Result<u64, StoreError> {
        self.read(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |row| row.get(0))?;
            Ok(u64::try_from(pages).unwrap_or(0))
        })
        .await
    }

    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let Backend::Sqlite(reader) = &self.inner.backend else {
            return Err(StoreError::Setup("not an SQLite store".into()));
        };
        let reader = Arc::clone(reader);
        tokio::task::spawn_blocking(move || {
            let conn = crate::lock::lock(&reader);
            f(&conn)
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Most recent requests, the last written (finished) first.
    pub async fn recent_requests(&self, limit: usize) -> Result<Vec<RequestRecord>, StoreError> {
        if let Some(r) = self.remote() {
            return r.recent_requests(limit).await;
        }
        self.read(move |conn| queries::recent_requests(conn, limit))
            .await
    }

    /// Number of stored request log rows.
    pub async fn request_count(&self) -> Result<u64, StoreError> {
        if let Some(r) = self.remote() {
            return r.request_count().await;
        }
        self.read(queries::request_count).await
    }

    /// Per-client ledger sums (see the module doc for `charged`).
    pub async fn ledger_totals(&self) -> Result<HashMap<String, LedgerTotals>, StoreError> {
        if let Some(r) = self.remote() {
            return r.ledger_totals().await;
        }
        self.read(queries::ledger_totals).await
    }

    /// Precharges with neither settle nor refund, oldest first (start-up recovery).
    pub async fn dangling_precharges(&self) -> Result<Vec<LedgerEntry>, StoreError> {
        if let Some(r) = self.remote() {
            return r.dangling_precharges().await;
        }
        self.read(queries::dangling_precharges).await
    }

    /// Every ledger entry of one request.
    pub async fn ledger_for_request(
        &self,
        request_id: &str,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        if let Some(r) = self.remote() {
            return r.ledger_for_request(request_id).await;
        }
        let id = request_id.to_owned();
        self.read(move |conn| queries::ledger_for_request(conn, &id))
            .await
    }

    /// Persisted disabled channels / keys.
    pub async fn disabled_states(&self) -> Result<Vec<StateRow>, StoreError> {
        if let Some(r) = self.remote() {
            return r.disabled_states().await;
        }
        self.read(queries::disabled_states).await
    }

    /// Channels of `client`'s task `id`, newest first, then pre-v4 ones (owner unknown).
    pub async fn task_channels(&self, client: &str, id: &str) -> Result<Vec<String>, StoreError> {
        if let Some(r) = self.remote() {
            return r.task_channels(client, id).await;
        }
        let (client, id) = (client.to_owned(), id.to_owned());
        self.read(move |conn| queries::task_channels(conn, &client, &id))
            .await
    }

    /// Affinity bindings that have not expired at `now_ms`.
    pub async fn affinity_bindings(&self, now_ms: i64) -> Result<Vec<AffinityBinding>, StoreError> {
        if let Some(r) = self.remote() {
            return r.affinity_bindings(now_ms).await;
        }
        self.read(move |conn| queries::affinity_bindings(conn, now_ms))
            .await
    }
}
