//! Benchmark of the shared quota on PostgreSQL (R17): what the one request-path
//! statement (the conditional debit + precharge + lease) costs a quota-limited request, how
//! many debits per second a replica gets through its pool, and how fast the writer commits
//! settles. Against an in-memory CAS debit (SQLite mode) for scale.
//!
//! `bash benches/pg-debit.sh` starts a private PostgreSQL on a free port and runs this;
//! directly: `cargo run --release --example pg_debit_bench -- postgres://user@127.0.0.1:PORT/db`.
use std::time::{Duration, Instant};

use switchyard::store::{now_ms, LedgerEntry, LedgerKind, PgOptions, Store};

const SEQUENTIAL: usize = 2_000;
const CONCURRENT: usize = 20_000;
const TASKS: usize = 32;

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: pg_debit_bench postgres://user@host:port/db")?;
    let store = Store::open_postgres(&url, PgOptions::default()).await?;
    let q = store.quota().ok_or("not a PostgreSQL store")?;
    let run = fastrand::u32(..);

    // 1. One debit at a time: the latency a quota-limited request waits for.
    let mut lat = Vec::with_capacity(SEQUENTIAL);
    for i in 0..SEQUENTIAL {
        let t = Instant::now();
        let d = q
            .debit(
                &format!("seq-{run}-{i}"),
                "bench-seq",
                1,
                i64::MAX,
                now_ms(),
            )
            .await?;
        lat.push(t.elapsed());
        assert!(d.admitted);
    }
    lat.sort();
    println!(
        "debit, one at a time ({SEQUENTIAL}): p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 1.0)
    );

    // 2. Many at once on one client (one row: the worst case for lock contention), first
    // with one statement per debit (`storage.debit_batch: 1`, the behaviour before batching
    // item 7), then batched (the default).
    let serial = Store::open_postgres(
        &url,
        PgOptions {
            debit_batch: 1,
            ..PgOptions::default()
        },
    )
    .await?;
    let qs = serial.quota().ok_or("not a PostgreSQL store")?;
    for (label, clients, q) in [
        ("one client, one statement per debit", 1usize, &qs),
        ("one client, batched", 1, &q),
        ("64 clients, batched", 64, &q),
    ] {
        let before = q.debit_statements();
        let t = Instant::now();
        let mut tasks = Vec::new();
        for k in 0..TASKS {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                for i in (k..CONCURRENT).step_by(TASKS) {
                    let client = format!("bench-{}", i % clients);
                    let s = format!("par-{run}-{clients}-{}-{i}", label.len());
                    q.debit(&s, &client, 1, i64::MAX, now_ms())
                        .await
                        .map(|d| d.admitted)?;
                }
                Ok::<_, switchyard::store::StoreError>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let secs = t.elapsed().as_secs_f64();
        let statements = q.debit_statements() - before;
        println!(
            "debit, {TASKS} tasks, {label}: {:.0} debits/s ({CONCURRENT} in {secs:.2} s, {statements} statements, mean batch {:.1})",
            CONCURRENT as f64 / secs,
            CONCURRENT as f64 / statements.max(1) as f64
        );
    }
    serial.shutdown().await?;

    // 3. Settles through the writer (batched, off the request path).
    let t = Instant::now();
    for i in 0..CONCURRENT {
        let client = format!("bench-{}", i % 64);
        let e = LedgerEntry {
            request_id: format!("par-{run}-64-{}-{i}", "64 clients, batched".len()),
            client: client.into(),
            kind: LedgerKind::Settle,
            amount: 0,
            ts_ms: now_ms(),
            foldable: false,
        };
        store.send_durable_async(e).await?;
    }
    store.flush().await?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "settle via the writer: {:.0} settles/s ({CONCURRENT} committed in {secs:.2} s)",
        CONCURRENT as f64 / secs
    );

    // For scale: the in-memory debit of one process (SQLite mode).
    let a = switchyard::billing::Account::default();
    let t = Instant::now();
    for _ in 0..1_000_000 {
        let _ = a.try_debit(1, Some(i64::MAX));
    }
    println!(
        "in-memory CAS debit (one process): {:.0} ns",
        t.elapsed().as_secs_f64() * 1e9 / 1e6
    );
    store.shutdown().await?;
    Ok(())
}
