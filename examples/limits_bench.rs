//! Micro-benchmark of the local rate-limit check (R15; target: under 1 µs):
//! prints nanoseconds per admission for a limited client (admit + settle, the clock read
//! included), a refused one, an unlimited one, many clients, and two threads at once; and
//! checks that a limited client's admission allocates nothing once its state exists.
//!
//! `cargo run --release --example limits_bench` (numbers from a debug build mean nothing).
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant as StdInstant;

use switchyard::limits::{Bounds, ClientLimits, KeyLimits, Limiter, Local};
use tokio::time::Instant;

const N: u32 = 2_000_000;

/// The system allocator, counting allocations.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn limited() -> ClientLimits {
    // Every kind set and large enough never to refuse: the full admission path each time.
    ClientLimits {
        rpm: u64::from(u32::MAX),
        rpd: u64::from(u32::MAX),
        tpm: 1 << 40,
        concurrency: 1_000_000,
    }
}

/// Run `f` `n` times; nanoseconds per call.
fn per_call(n: u32, mut f: impl FnMut(u32)) -> f64 {
    for i in 0..n / 10 {
        f(i); // warm up
    }
    let t = StdInstant::now();
    for i in 0..n {
        f(i);
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn admit_settle(l: &Limiter<Local>, client: &str, lim: &ClientLimits) {
    let now = Instant::now();
    match l.admit_client_now(client, lim, 1500, now) {
        Ok(a) => a.settle(black_box(1200), now),
        Err(r) => {
            black_box(r);
        }
    }
}

fn main() {
    let l = Limiter::local(Bounds::default());
    let lim = limited();
    let ns = per_call(N, |_| admit_settle(&l, "alice", &lim));
    println!("limited client, admit + settle:        {ns:7.1} ns/request");
    let before = ALLOCS.load(Ordering::Relaxed);
    per_call(10_000, |_| admit_settle(&l, "alice", &lim));
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    println!("allocations in 11000 limited admissions: {allocs}");
    assert_eq!(allocs, 0, "the local admission path must not allocate");

    let refused = ClientLimits {
        rpm: 10,
        ..ClientLimits::default()
    };
    let ns = per_call(N, |_| admit_settle(&l, "bob", &refused));
    println!("limited client, refused by rpm:        {ns:7.1} ns/request");

    let free = ClientLimits::default();
    let ns = per_call(N, |_| admit_settle(&l, "carol", &free));
    println!("unlimited client:                      {ns:7.1} ns/request");

    let names: Vec<String> = (0..1000).map(|i| format!("client-{i}")).collect();
    let ns = per_call(N, |i| admit_settle(&l, &names[(i % 1000) as usize], &lim));
    println!("1000 limited clients, round robin:     {ns:7.1} ns/request");

    let key = KeyLimits {
        rpm: 10_000,
        tpm: 2_000_000,
        concurrency: 100,
    };
    let now = Instant::now();
    l.take_key_now("openai", "fp-1", &key, 1000, now)
        .unwrap()
        .settle(900, now);
    let ns = per_call(N, |_| {
        black_box(l.key_remaining_fraction("openai", "fp-1", &key, Instant::now()));
    });
    println!("limited key, remaining fraction:       {ns:7.1} ns/call");
    let ns = per_call(N, |_| {
        black_box(l.key_room("openai", "fp-1", &key, 1000, Instant::now()));
    });
    println!("limited key, room now?:                {ns:7.1} ns/call");

    let l = Arc::new(l);
    for (label, same) in [
        ("2 threads, one client each:", false),
        ("2 threads, the same client:", true),
    ] {
        let t = StdInstant::now();
        let threads: Vec<_> = (0..2)
            .map(|k| {
                let l = l.clone();
                let name = if same {
                    "shared".to_string()
                } else {
                    format!("thread-{k}")
                };
                std::thread::spawn(move || per_call(N, |_| admit_settle(&l, &name, &limited())))
            })
            .collect();
        let each: Vec<f64> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        let wall = t.elapsed().as_nanos() as f64 / f64::from(N + N / 10) / 2.0;
        println!(
            "{label:38} {:7.1} ns/request per thread, {wall:.1} ns wall per request",
            each[0].max(each[1])
        );
    }
}
