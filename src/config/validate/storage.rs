//! The `storage:` and `shared:` sections: SQLite file or PostgreSQL URL (R17), retention,
//! and what quota-limited clients get while PostgreSQL is unreachable.

use std::str::FromStr;
use std::time::Duration;

use crate::config::error::Collector;
use crate::config::load::raw::RawStorage;
use crate::config::load::scalars::{dur, dur_nonzero};
use crate::config::model::{RequestLogRetention, Storage};
use crate::secret::Secret;

/// Default `storage.lease_ttl`.
pub const LEASE_TTL: Duration = Duration::from_secs(30);
/// Default `storage.queue_capacity`.
pub const QUEUE_CAPACITY: usize = 8192;
/// Default `storage.pool_size`.
pub const POOL_SIZE: usize = 8;
/// Default `storage.pool_timeout`.
pub const POOL_TIMEOUT: Duration = Duration::from_secs(2);
/// Default `storage.debit_batch`.
pub const DEBIT_BATCH: usize = 256;
/// Largest `storage.debit_batch`.
pub const MAX_DEBIT_BATCH: usize = 4096;

pub(crate) fn storage(raw: &RawStorage, collector: &mut Collector) -> Storage {
    if raw.path.is_some() && raw.url.is_some() {
        collector.push(
            "storage.url",
            "set either storage.path (SQLite, one process) or storage.url (PostgreSQL, several replicas), not both",
        );
    }
    let path = raw.path.clone().unwrap_or_else(|| "./switchyard.db".into());
    if path.trim().is_empty() {
        collector.push("storage.path", "must not be empty");
    }
    let url = raw
        .url
        .as_deref()
        .and_then(|given| postgres_url(given, collector));
    let raw_request_log = raw.request_log.as_ref();
    let keep = RequestLogRetention::default();
    let request_log = RequestLogRetention {
        max_age: dur(
            collector,
            "storage.request_log.max_age",
            &raw_request_log.and_then(|raw_log| raw_log.max_age.clone()),
            keep.max_age,
        ),
        max_rows: raw_request_log
            .and_then(|raw_log| raw_log.max_rows)
            .unwrap_or(keep.max_rows),
    };
    let lease_ttl = dur_nonzero(collector, "storage.lease_ttl", &raw.lease_ttl, LEASE_TTL);
    if lease_ttl < Duration::from_secs(1) {
        collector.push("storage.lease_ttl", "must be at least 1s");
    }
    let queue_capacity = count(
        collector,
        "storage.queue_capacity",
        raw.queue_capacity,
        QUEUE_CAPACITY,
    );
    let pool_size = count(collector, "storage.pool_size", raw.pool_size, POOL_SIZE);
    let pool_timeout = dur_nonzero(
        collector,
        "storage.pool_timeout",
        &raw.pool_timeout,
        POOL_TIMEOUT,
    );
    let mut debit_batch = count(
        collector,
        "storage.debit_batch",
        raw.debit_batch,
        DEBIT_BATCH,
    );
    if debit_batch > MAX_DEBIT_BATCH {
        collector.push(
            "storage.debit_batch",
            format!("must be at most {MAX_DEBIT_BATCH}"),
        );
        debit_batch = DEBIT_BATCH;
    }
    Storage {
        path,
        url,
        lease_ttl,
        queue_capacity,
        pool_size,
        pool_timeout,
        debit_batch,
        request_log,
    }
}

/// A count that must be positive (`default` when unset, and after an error for 0).
fn count(collector: &mut Collector, key: &str, value: Option<u64>, default: usize) -> usize {
    match value {
        Some(0) => {
            collector.push(key, "must be greater than zero");
            default
        }
        Some(number) => usize::try_from(number).unwrap_or(usize::MAX),
        None => default,
    }
}

/// A `postgres://` URL this build can use. The value itself is never echoed (it may hold a
/// password).
fn postgres_url(url: &str, collector: &mut Collector) -> Option<Secret> {
    const KEY: &str = "storage.url";
    const FORM: &str = "expected postgres://user[:password]@host[:port]/database";
    let url = url.trim();
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        collector.push(KEY, format!("not a PostgreSQL URL: {FORM}"));
        return None;
    }
    let parsed = match tokio_postgres::Config::from_str(url) {
        Ok(config) => config,
        Err(e) => {
            collector.push(KEY, format!("not a usable PostgreSQL URL ({e}): {FORM}"));
            return None;
        }
    };
    if parsed.get_hosts().is_empty() {
        collector.push(KEY, format!("names no host: {FORM}"));
        return None;
    }
    if parsed.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        collector.push(
            KEY,
            "sslmode=require: this build speaks to PostgreSQL without TLS; use sslmode=disable on a trusted network (or a local TLS tunnel)",
        );
        return None;
    }
    Some(Secret::new(url))
}
