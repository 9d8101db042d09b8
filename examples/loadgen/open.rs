//! Open-loop load: requests start on a fixed schedule whatever the target does, and each
//! latency runs from the scheduled start (no coordinated omission). The schedule is kept by
//! a thread of its own (`pace`): tokio's timer ticks once a millisecond, so above 1,000 rps
//! it would release the requests in bursts at each tick instead of one every period.
use std::time::Duration;

use clap::Args;
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::{client, summary, Prepared, Target};

#[derive(Args)]
pub struct OpenArgs {
    #[command(flatten)]
    target: Target,
    /// Requests per second.
    #[arg(long)]
    rate: f64,
    /// Measured duration.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Unmeasured lead-in at the same rate.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Samples whose response header NAME contains `--split-contains` are summarised apart.
    #[arg(long)]
    split_header: Option<String>,
    #[arg(long, default_value = "->")]
    split_contains: String,
}

struct Sample {
    measured: bool,
    latency_us: u64,
    ok: bool,
    split: bool,
    error: Option<String>,
}

async fn one(p: &Prepared, c: &crate::HttpClient, split: Option<&(String, String)>) -> Sample {
    let mut s = Sample {
        measured: false,
        latency_us: 0,
        ok: false,
        split: false,
        error: None,
    };
    let req = match p.request() {
        Ok(r) => r,
        Err(e) => {
            s.error = Some(e.to_string());
            return s;
        }
    };
    let fut = async {
        let resp = c.request(req).await?;
        let status = resp.status();
        let is_split = split
            .and_then(|(h, sub)| {
                resp.headers()
                    .get(h.as_str())
                    .and_then(|v| v.to_str().ok())
                    .map(|v| v.contains(sub.as_str()))
            })
            .unwrap_or(false);
        resp.into_body().collect().await?;
        anyhow::Ok((status, is_split))
    };
    match tokio::time::timeout(p.timeout, fut).await {
        Ok(Ok((status, is_split))) => {
            s.ok = status.is_success();
            s.split = is_split;
            if !s.ok {
                s.error = Some(format!("status {}", status.as_u16()));
            }
        }
        Ok(Err(e)) => s.error = Some(format!("transport: {e}")),
        Err(_) => s.error = Some("timeout".into()),
    }
    s
}

/// Hands each request's scheduled start to the runtime at that time, sleeping in between
/// (`nanosleep`: late by the kernel's timer slack, ~50 µs, not by up to a millisecond as
/// tokio's timer is). Returns each request's lateness, in µs.
fn pace(
    start: std::time::Instant,
    period: Duration,
    n: u64,
    due: &mpsc::UnboundedSender<std::time::Instant>,
) -> Vec<u64> {
    let mut late_us = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for i in 0..n {
        let at = start + period.mul_f64(i as f64);
        let now = std::time::Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        let lag = std::time::Instant::now().saturating_duration_since(at);
        late_us.push(lag.as_micros() as u64);
        if due.send(at).is_err() {
            break;
        }
    }
    late_us
}

pub async fn run(a: OpenArgs) -> anyhow::Result<serde_json::Value> {
    anyhow::ensure!(
        a.rate > 0.0 && a.rate <= 50_000.0,
        "rate must be in (0, 50000]"
    );
    let p = a.target.prepare()?;
    let c = client(4096);
    let split = a
        .split_header
        .clone()
        .map(|h| (h, a.split_contains.clone()));
    let period = Duration::from_secs_f64(1.0 / a.rate);
    let total = a.warmup + a.duration;
    let n = (total.as_secs_f64() * a.rate).round() as u64;
    let start = std::time::Instant::now() + Duration::from_millis(20);
    let measure_from = Instant::from_std(start + a.warmup);
    let (tx, mut rx) = mpsc::unbounded_channel::<Sample>();
    let (due_tx, mut due) = mpsc::unbounded_channel::<std::time::Instant>();
    let pacer = std::thread::Builder::new()
        .name("pacer".into())
        .spawn(move || pace(start, period, n, &due_tx))?;
    while let Some(at) = due.recv().await {
        let at = Instant::from_std(at);
        let (p, c, tx, split) = (p.clone(), c.clone(), tx.clone(), split.clone());
        tokio::spawn(async move {
            let mut s = one(&p, &c, split.as_ref()).await;
            s.latency_us = at.elapsed().as_micros() as u64;
            s.measured = at >= measure_from;
            let _ = tx.send(s);
        });
    }
    drop(tx);
    let mut late_us = pacer
        .join()
        .map_err(|_| anyhow::anyhow!("the pacer thread panicked"))?;
    let mut all = Vec::new();
    let (mut plain, mut split_lat) = (Vec::new(), Vec::new());
    let mut errors: std::collections::BTreeMap<String, u64> = Default::default();
    let (mut ok, mut failed) = (0u64, 0u64);
    let deadline = Instant::now() + p.timeout + Duration::from_secs(5);
    while let Ok(Some(s)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if !s.measured {
            continue;
        }
        if s.ok {
            ok += 1;
            all.push(s.latency_us);
            if s.split {
                split_lat.push(s.latency_us);
            } else {
                plain.push(s.latency_us);
            }
        } else {
            failed += 1;
            let key = s.error.unwrap_or_default();
            let key: String = key.chars().take(80).collect();
            *errors.entry(key).or_default() += 1;
        }
    }
    let sent = (a.duration.as_secs_f64() * a.rate).round() as u64;
    let mut out = serde_json::json!({
        "mode": "open",
        "rate": a.rate,
        "duration_s": a.duration.as_secs_f64(),
        "sent": sent,
        "ok": ok,
        "failed": failed,
        "missing": sent.saturating_sub(ok + failed),
        "errors": errors,
        "schedule_lag": summary(&mut late_us),
        "latency": summary(&mut all),
    });
    if split.is_some() {
        out["latency_plain"] = summary(&mut plain);
        out["latency_split"] = summary(&mut split_lat);
    }
    Ok(out)
}
