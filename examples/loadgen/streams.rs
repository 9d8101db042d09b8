//! Streaming modes: per-request SSE timing (`sse`) and many concurrent held streams (`hold`).
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::procs::rss_kib;
use crate::{client, summary, HttpClient, Prepared, Target};

/// The terminal event the mock and the gateway end an OpenAI stream with.
const DONE: &[u8] = b"[DONE]";

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// What one streamed response looked like.
struct StreamResult {
    first_byte: Option<Duration>,
    last_byte: Duration,
    bytes: usize,
    done: bool,
}

/// Sends one request and reads the body frame by frame; `on_first` runs at the first data.
async fn stream_one(
    p: &Prepared,
    c: &HttpClient,
    mut on_first: impl FnMut(),
) -> anyhow::Result<StreamResult> {
    let t0 = Instant::now();
    let resp = c.request(p.request()?).await?;
    anyhow::ensure!(resp.status().is_success(), "status {}", resp.status());
    let mut body = resp.into_body();
    let mut r = StreamResult {
        first_byte: None,
        last_byte: Duration::ZERO,
        bytes: 0,
        done: false,
    };
    let mut tail: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        if r.first_byte.is_none() {
            r.first_byte = Some(t0.elapsed());
            on_first();
        }
        r.bytes += data.len();
        tail.extend_from_slice(data);
        if contains(&tail, DONE) {
            r.done = true;
        }
        let keep = tail.len().saturating_sub(DONE.len());
        tail.drain(..keep);
    }
    r.last_byte = t0.elapsed();
    Ok(r)
}

#[derive(Args)]
pub struct SseArgs {
    #[command(flatten)]
    target: Target,
    /// Requests, one after another.
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// Unmeasured requests first.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
}

pub async fn sse(a: SseArgs) -> anyhow::Result<serde_json::Value> {
    let p = a.target.prepare()?;
    let c = client(8);
    let (mut ttfb, mut ttlb) = (Vec::new(), Vec::new());
    let (mut failed, mut incomplete, mut bytes) = (0u64, 0u64, 0usize);
    for i in 0..a.warmup + a.count {
        match tokio::time::timeout(p.timeout, stream_one(&p, &c, || {})).await {
            Ok(Ok(r)) if i >= a.warmup => {
                if !r.done {
                    incomplete += 1;
                }
                bytes = r.bytes;
                ttfb.push(r.first_byte.unwrap_or(r.last_byte).as_micros() as u64);
                ttlb.push(r.last_byte.as_micros() as u64);
            }
            Ok(Ok(_)) => {}
            _ if i < a.warmup => {}
            _ => failed += 1,
        }
    }
    Ok(serde_json::json!({
        "mode": "sse",
        "count": a.count,
        "failed": failed,
        "incomplete": incomplete,
        "body_bytes": bytes,
        "ttfb": summary(&mut ttfb),
        "ttlb": summary(&mut ttlb),
    }))
}

#[derive(Args)]
pub struct HoldArgs {
    #[command(flatten)]
    target: Target,
    /// Concurrent streams to open.
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// Streams being opened at once (ramp).
    #[arg(long, default_value_t = 256)]
    ramp: usize,
    /// Process whose RSS is sampled (the gateway).
    #[arg(long)]
    pid: u32,
    /// Give up after this long.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    deadline: Duration,
}

#[derive(Default)]
struct Counters {
    opened: AtomicUsize,
    completed: AtomicUsize,
    incomplete: AtomicUsize,
    failed: AtomicUsize,
}

pub async fn hold(a: HoldArgs) -> anyhow::Result<serde_json::Value> {
    let p = a.target.prepare()?;
    let c = client(0);
    let rss_before = rss_kib(a.pid)?;
    let k = Arc::new(Counters::default());
    let gate = Arc::new(Semaphore::new(a.ramp.max(1)));
    let t0 = Instant::now();
    for _ in 0..a.streams {
        let (p, c, k, gate) = (p.clone(), c.clone(), k.clone(), gate.clone());
        tokio::spawn(async move {
            let mut permit = gate.acquire_owned().await.ok();
            let opened = || {
                k.opened.fetch_add(1, Ordering::SeqCst);
                permit.take();
            };
            match stream_one(&p, &c, opened).await {
                Ok(r) if r.done => k.completed.fetch_add(1, Ordering::SeqCst),
                Ok(_) => k.incomplete.fetch_add(1, Ordering::SeqCst),
                Err(_) => k.failed.fetch_add(1, Ordering::SeqCst),
            };
        });
    }
    let deadline = t0 + a.deadline;
    let (mut peak_rss, mut peak_live) = (rss_before, 0usize);
    let mut rss_all_open: Option<u64> = None;
    let mut all_open_at: Option<Duration> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rss = rss_kib(a.pid).unwrap_or(0);
        peak_rss = peak_rss.max(rss);
        let opened = k.opened.load(Ordering::SeqCst);
        let ended = k.completed.load(Ordering::SeqCst)
            + k.incomplete.load(Ordering::SeqCst)
            + k.failed.load(Ordering::SeqCst);
        peak_live = peak_live.max(opened.saturating_sub(ended));
        if rss_all_open.is_none() && opened + k.failed.load(Ordering::SeqCst) >= a.streams {
            rss_all_open = Some(rss);
            all_open_at = Some(t0.elapsed());
        }
        if ended >= a.streams || Instant::now() >= deadline {
            break;
        }
    }
    let completed = k.completed.load(Ordering::SeqCst);
    let during = rss_all_open.unwrap_or(peak_rss);
    let per_stream = during.saturating_sub(rss_before) as f64 * 1024.0 / a.streams.max(1) as f64;
    Ok(serde_json::json!({
        "mode": "hold",
        "streams": a.streams,
        "opened": k.opened.load(Ordering::SeqCst),
        "completed": completed,
        "incomplete": k.incomplete.load(Ordering::SeqCst),
        "failed": k.failed.load(Ordering::SeqCst),
        "dropped": a.streams - completed.min(a.streams),
        "peak_live": peak_live,
        "all_open_after_s": all_open_at.map(|d| d.as_secs_f64()),
        "elapsed_s": t0.elapsed().as_secs_f64(),
        "rss_before_kib": rss_before,
        "rss_all_open_kib": during,
        "rss_peak_kib": peak_rss,
        "bytes_per_stream": per_stream.round(),
    }))
}
