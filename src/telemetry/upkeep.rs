//! The Prometheus recorder's upkeep (B-bounded-resources): histogram samples are buffered until
//! drained into their summaries, which rendering `/metrics` does — so a gateway nobody
//! scrapes grew with its traffic. One thread per process drains them every
//! [`UPKEEP_EVERY`], scraped or not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;

/// How often buffered histogram samples are drained when nobody scrapes.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(1);

static PASSES: AtomicU64 = AtomicU64::new(0);

/// Starts the upkeep thread for `handle` (call once, with the installed recorder's handle).
pub(super) fn start(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            handle.run_upkeep();
            PASSES.fetch_add(1, Ordering::Relaxed);
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "metrics upkeep thread not started: histograms are drained only when /metrics is scraped");
    }
}

/// Upkeep passes run so far in this process.
pub fn passes() -> u64 {
    PASSES.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    /// The upkeep runs though nobody renders the metrics.
    #[test]
    fn histograms_are_drained_without_a_scrape() {
        assert!(super::super::install().is_some(), "recorder installed");
        metrics::histogram!(super::super::REQUEST_DURATION).record(0.5);
        let before = super::passes();
        let t = std::time::Instant::now();
        while super::passes() <= before && t.elapsed() < super::UPKEEP_EVERY * 5 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(super::passes() > before, "an upkeep pass ran unscraped");
    }
}
