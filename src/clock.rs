//! The wall clock, read in one place: Unix time in milliseconds, for request-log and ledger
//! rows, persisted state and request ids. Durations and deadlines use `tokio::time::Instant`.

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
