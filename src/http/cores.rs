//! Serving threads: the client listener's connections are served on one current-thread
//! runtime per core, so a request, its upstream connection and its timers stay on one
//! thread (no wake-up crosses threads on the request path); `slot` names the serving
//! thread, so that per-thread state (the upstream connection pool) is kept per thread.

use std::cell::Cell;
use std::future::Future;
use tokio::sync::{oneshot, watch};

/// At most this many serving threads (`--workers`).
pub const MAX: usize = 64;

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(0) };
}

/// The serving thread this code runs on: `1..=MAX` on a serving thread, 0 anywhere else
/// (the main runtime: admin, probes, background tasks; and the in-process tests).
pub fn slot() -> usize {
    SLOT.with(Cell::get)
}

/// The number of serving threads: `requested`, else one per core the process may use.
pub fn count(requested: Option<usize>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    requested.unwrap_or(cores).clamp(1, MAX)
}

/// Start serving thread `index` (0-based) running `serve` on a current-thread runtime of
/// its own. The runtime keeps running what the requests spawned (a refund on its way to the
/// store, a batch of debits, a stream's upstream body read off to the pool) after `serve`
/// returns, until `finish` turns true or its sender is gone; then it ends, and the returned
/// receiver hears so. `None` (logged) when the runtime or the thread cannot be made.
pub fn spawn<F>(
    index: usize,
    serve: F,
    finish: watch::Receiver<bool>,
) -> Option<oneshot::Receiver<()>>
where
    F: Future<Output = ()> + Send + 'static,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::warn!(error = %e, "cannot start a serving thread's runtime");
            return None;
        }
    };
    let (tx, done) = oneshot::channel();
    let started = std::thread::Builder::new()
        .name(format!("switchyard-serve-{index}"))
        .spawn(move || {
            SLOT.with(|s| s.set(index + 1));
            rt.block_on(async move {
                tokio::spawn(tick());
                serve.await;
                wait_true(finish).await;
            });
            drop(rt);
            let _ = tx.send(());
        });
    match started {
        Ok(_) => Some(done),
        Err(e) => {
            tracing::warn!(error = %e, "cannot start a serving thread");
            None
        }
    }
}

/// A timer due within [`TICK`] at all times on a serving thread, so that a timer a request
/// arms (the next head's read deadline, the upstream's first-byte timeout: seconds away) is
/// never the runtime's earliest. Tokio wakes its own driver (an eventfd write, then an
/// epoll return for nothing) whenever a new timer is due before the earliest one it parked
/// on; without this, that happened once per request.
async fn tick() {
    loop {
        tokio::time::sleep(TICK).await;
    }
}

/// The period of [`tick`]: shorter than any per-request timer (the shortest, the head read
/// deadline, is 10 s by default), rare enough to cost nothing idle.
const TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Until `rx` holds `true` (or its sender is gone).
pub async fn wait_true(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_count_is_asked_for_or_the_cores_and_between_one_and_max() {
        assert_eq!(count(Some(0)), 1);
        assert_eq!(count(Some(3)), 3);
        assert_eq!(count(Some(10_000)), MAX);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(count(None), cores.clamp(1, MAX));
    }

    /// A serving thread knows its slot; the thread that started it does not share it; what
    /// the served requests spawned runs on after `serve` returns, until `finish`.
    #[tokio::test]
    async fn a_serving_thread_has_its_slot_and_finishes_what_its_requests_left() {
        let (finish, finished) = watch::channel(false);
        let (seen_tx, seen) = oneshot::channel();
        let (left_tx, left) = oneshot::channel();
        let serve = async move {
            let _ = seen_tx.send(slot());
            // A task a request leaves behind: it runs after `serve` has returned.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = left_tx.send(slot());
            });
        };
        let done = spawn(4, serve, finished).expect("thread starts");
        assert_eq!(seen.await.expect("served"), 5);
        assert_eq!(slot(), 0);
        assert_eq!(left.await.expect("the left task ran"), 5);
        finish.send(true).expect("thread listens");
        done.await.expect("the thread ended");
    }
}
