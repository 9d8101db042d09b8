//! Affinity snapshots stay bounded (R8.3, B-affinity-bounded): a period with a great many
//! changed bindings is written whole — nothing dropped at the store queue — while the
//! snapshot's extra memory stays at about one shard's changes and one batch, whatever the
//! number of changes. Memory is measured with a counting global allocator.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use switchyard::affinity::{persist, Bindings, StickyKind};
use switchyard::store::Store;

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const CHANGED: usize = 200_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_snapshot_is_written_whole_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.db").to_string_lossy()).unwrap();
    let b = Bindings::default();
    let expires = tokio::time::Instant::now() + Duration::from_secs(3600);
    let before = NOW.load(Ordering::Relaxed);
    for i in 0..CHANGED as u128 {
        b.put(
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            StickyKind::Session,
            "channel-a",
            expires,
            true,
        );
    }
    let held = NOW.load(Ordering::Relaxed) - before;
    let per_binding = held / CHANGED;
    assert!(per_binding <= 160, "{per_binding} bytes per binding");

    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let written = persist::snapshot(&b, &store).await;
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert_eq!(written, CHANGED);
    assert_eq!(store.dropped(), 0, "nothing dropped at the queue");
    let rows = store.affinity_bindings(0).await.unwrap();
    assert_eq!(rows.len(), CHANGED);
    // One shard's changes (200k / 32 × ~64 B ≈ 400 KiB) plus a batch and the writer's own
    // buffers: far below the whole set (200k × ~64 B ≈ 12 MiB), and independent of it.
    assert!(peak < 4 << 20, "snapshot peak {} KiB", peak >> 10);
    eprintln!(
        "{per_binding} B per binding in the store; snapshot peak {} KiB for {CHANGED} changes",
        peak >> 10
    );
    // Nothing is left marked changed; a second snapshot writes nothing.
    assert_eq!(persist::snapshot(&b, &store).await, 0);
}
