//! Allocation counting for the bench build (feature `count-allocs`, for BENCHMARKS.md): a global
//! allocator that counts every allocation and reallocation, then hands it to mimalloc. The
//! count is exported as `switchyard_allocations_total` on `/metrics` in that build only, so
//! `benches/callgrind.sh` can state allocations per request. A normal build never uses it.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Counts, then allocates with mimalloc.
pub struct Counting;

// SAFETY: every method forwards to mimalloc's own `GlobalAlloc` with the caller's arguments
// unchanged; the counter is a relaxed atomic add with no effect on the allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and reallocations) so far through [`Counting`]; 0 when it is not the global
/// allocator.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// The Prometheus lines for the count, appended to `/metrics` in the counting build.
pub fn exposition() -> String {
    format!(
        "# HELP switchyard_allocations_total Heap allocations since start (bench build only).\n\
         # TYPE switchyard_allocations_total counter\nswitchyard_allocations_total {}\n",
        allocations()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_goes_through_it() {
        let before = allocations();
        let layout = Layout::from_size_align(64, 8).expect("a valid layout");
        // SAFETY: a non-zero layout; the pointer is freed with the same layout below, after
        // a realloc to a larger size with the same alignment.
        unsafe {
            let p = Counting.alloc(layout);
            assert!(!p.is_null());
            let q = Counting.realloc(p, layout, 128);
            assert!(!q.is_null());
            Counting.dealloc(q, Layout::from_size_align(128, 8).expect("a valid layout"));
        }
        assert!(
            allocations() >= before + 2,
            "an alloc and a realloc are counted"
        );
        assert!(exposition().contains("switchyard_allocations_total "));
    }
}
