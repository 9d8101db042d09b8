//! The read side of [`Store`]: queries on the read connection, each in `spawn_blocking`.

use std::collections::HashMap;
use std::sync::Arc;

use rusqlite::Connection;

use super::records::{AffinityBinding, ChannelState, LedgerEntry, LedgerTotals, RequestRecord};
use super::{queries, Store, StoreError};

impl Store {
    /// Pages the database has now.
    pub async fn page_count(&self) -> Result<u64, StoreError> {
        self.read(|c| {
            let n: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let reader = Arc::clone(&self.inner.reader);
        tokio::task::spawn_blocking(move || {
            let conn = crate::sync::lock(&reader);
            f(&conn)
        })
        .await
        .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Most recent requests, the last written (finished) first.
    pub async fn recent_requests(&self, limit: usize) -> Result<Vec<RequestRecord>, StoreError> {
        self.read(move |c| queries::recent_requests(c, limit)).await
    }

    /// Number of stored request log rows.
    pub async fn request_count(&self) -> Result<u64, StoreError> {
        self.read(queries::request_count).await
    }

    /// Per-client ledger sums (see the module doc for `charged`).
    pub async fn ledger_totals(&self) -> Result<HashMap<String, LedgerTotals>, StoreError> {
        self.read(queries::ledger_totals).await
    }

    /// Precharges with neither settle nor refund, oldest first (start-up recovery).
    pub async fn dangling_precharges(&self) -> Result<Vec<LedgerEntry>, StoreError> {
        self.read(queries::dangling_precharges).await
    }

    /// Every ledger entry of one request.
    pub async fn ledger_for_request(
        &self,
        request_id: &str,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        let id = request_id.to_owned();
        self.read(move |c| queries::ledger_for_request(c, &id))
            .await
    }

    /// Persisted disabled channels / keys.
    pub async fn disabled_states(&self) -> Result<Vec<ChannelState>, StoreError> {
        self.read(queries::disabled_states).await
    }

    /// Channels of `client`'s task `id`, newest first, then pre-v4 ones (owner unknown).
    pub async fn task_channels(&self, client: &str, id: &str) -> Result<Vec<String>, StoreError> {
        let (client, id) = (client.to_owned(), id.to_owned());
        self.read(move |c| queries::task_channels(c, &client, &id))
            .await
    }

    /// Affinity bindings that have not expired at `now_ms`.
    pub async fn affinity_bindings(&self, now_ms: i64) -> Result<Vec<AffinityBinding>, StoreError> {
        self.read(move |c| queries::affinity_bindings(c, now_ms))
            .await
    }
}
