//! Validation of `shared:` (R17): the Redis URL and the replica count.

use crate::config::error::Collector;
use crate::config::load::raw::RawShared;
use crate::config::model::Shared;
use crate::secret::Secret;

/// `shared.redis` must be a `redis://` URL the client accepts; `shared.replicas` ≥ 1.
pub(crate) fn shared(raw: &RawShared, collector: &mut Collector) -> Shared {
    let redis = raw
        .redis
        .as_deref()
        .map(str::trim)
        .filter(|url| !url.is_empty());
    if let Some(url) = redis {
        let scheme_ok = url.starts_with("redis://");
        if !scheme_ok {
            collector.push(
                "shared.redis",
                "must be a redis:// URL, e.g. redis://127.0.0.1:6379/0 (TLS and unix sockets \
                 are not supported: reach Redis over a local TLS tunnel)",
            );
        } else if let Err(e) = redis::Client::open(url) {
            collector.push(
                "shared.redis",
                format!("is not a valid Redis URL ({e}); expected redis://[user:password@]host:port[/db]"),
            );
        }
    }
    let replicas = match raw.replicas {
        Some(0) => {
            collector.push(
                "shared.replicas",
                "must be at least 1 (the number of switchyard replicas sharing the Redis)",
            );
            1
        }
        Some(count) if count > 10_000 => {
            collector.push("shared.replicas", "must be at most 10000");
            1
        }
        Some(count) => count as u32,
        None => 1,
    };
    Shared {
        redis: redis.map(Secret::new),
        replicas,
        fail_open: raw.fail_open.unwrap_or(false),
    }
}
