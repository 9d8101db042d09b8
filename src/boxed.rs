//! Futures made in their boxes: the one way the request path boxes a large future.
//!
//! `Box::pin(f)` makes `f` on the stack, then copies it whole into the box, and a request's
//! futures are several KB (the handler ~4.7 KB, the attempt loop ~7.8 KB, an exchange
//! ~6.8 KB). `in_box(|| f(..))` allocates first and makes the future in its box
//! (`Box::write` into `Box::new_uninit()`): callgrind shows no copy of it (BENCHMARKS.md,
//! twelfth stop).

use std::pin::Pin;

/// `make()`'s future, made in a pinned box of its own.
#[inline(always)]
pub fn in_box<F>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Pin::from(Box::write(Box::new_uninit(), make()))
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_boxed_future_runs_to_its_output() {
        let n = 41;
        assert_eq!(super::in_box(|| async move { n + 1 }).await, 42);
    }
}
