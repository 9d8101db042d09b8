//! The store on PostgreSQL (R17, R11.2–R11.3): every operation against a private server,
//! the conditional debit under concurrency from several stores (replicas), settle/refund
//! exactly once against an expiring lease, an unreachable server, migrations and retention.
//! Each test starts its own throwaway cluster (`support::external::Postgres`, ~1 s).
use crate::support;

#[path = "postgres/batch.rs"]
mod batch;
#[path = "postgres/faults.rs"]
mod faults;
#[path = "postgres/ops.rs"]
mod ops;
#[path = "postgres/quota.rs"]
mod quota;

use std::time::Duration;

use support::external::Postgres;
use switchyard::store::{LedgerEntry, LedgerKind, PgOptions, RequestRecord, Store};

/// A store on `pg` with a lease of `ttl`.
pub async fn open(pg: &Postgres, ttl: Duration) -> Store {
    let opts = PgOptions {
        lease_ttl: ttl,
        ..PgOptions::default()
    };
    Store::open_postgres(&pg.url(), opts)
        .await
        .expect("store opens")
}

pub fn entry(session: &str, client: &str, kind: LedgerKind, amount: i64) -> LedgerEntry {
    LedgerEntry {
        request_id: session.into(),
        client: client.into(),
        kind,
        amount,
        ts_ms: switchyard::store::now_ms(),
        foldable: false,
    }
}

pub fn request(id: &str, ts_ms: i64) -> RequestRecord {
    RequestRecord {
        id: id.into(),
        ts_ms,
        client: "alice".into(),
        group: "default".into(),
        public_model: "m".into(),
        upstream_model: "m-1".into(),
        path: "/v1/chat/completions".into(),
        stream: true,
        chain: "a".into(),
        final_status: 200,
        error_code: Some("x".into()),
        sticky_kind: None,
        sticky_hit: Some(false),
        prompt_tokens: 7,
        completion_tokens: 9,
        latency_ms: 12,
        ..RequestRecord::default()
    }
}

/// `SELECT` one integer with psql.
pub fn int(pg: &Postgres, sql: &str) -> i64 {
    let out = pg.psql(sql);
    out.parse().unwrap_or_else(|_| panic!("{sql} gave {out:?}"))
}

/// Retries `f` for up to 5 s until it returns an admitted debit.
pub async fn eventually_ok<F, Fut>(mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<
        Output = Result<switchyard::store::Debit, switchyard::store::StoreError>,
    >,
{
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        if matches!(f().await, Ok(d) if d.admitted) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
