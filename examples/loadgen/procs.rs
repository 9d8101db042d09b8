//! Process facts from /proc (RSS) and the cold-start mode: exec -> ready URL 200.
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Args;
use tokio::time::Instant;

use crate::{client, summary, summary_in, Target};

/// Resident set size of `pid` in KiB (`VmRSS` in /proc/PID/status).
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS for pid {pid}"))
}

#[derive(Args)]
pub struct ColdArgs {
    /// Readiness URL polled until it answers 200 (e.g. the admin /readyz).
    #[arg(long)]
    ready: String,
    /// Starts to time.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Idle time after ready before reading RSS.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    settle: Duration,
    /// The command to start.
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

fn stop(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub async fn coldstart(a: ColdArgs) -> anyhow::Result<serde_json::Value> {
    let target = Target {
        url: a.ready.parse()?,
        body: None,
        headers: Vec::new(),
        timeout: Duration::from_secs(1),
    };
    let p = target.prepare()?;
    let (mut ready_us, mut rss) = (Vec::new(), Vec::new());
    let mut failures = 0u64;
    for _ in 0..a.runs {
        // A fresh client per run: no pooled connection to a previous process.
        let c = client(0);
        let t0 = Instant::now();
        let mut child = Command::new(&a.cmd[0])
            .args(&a.cmd[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let deadline = t0 + Duration::from_secs(10);
        let mut ok = false;
        while Instant::now() < deadline {
            if let Ok(Ok(r)) =
                tokio::time::timeout(Duration::from_millis(200), c.request(p.request()?)).await
            {
                if r.status().is_success() {
                    ok = true;
                    break;
                }
            }
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let took = t0.elapsed();
        if ok {
            ready_us.push(took.as_micros() as u64);
            tokio::time::sleep(a.settle).await;
            if let Ok(kib) = rss_kib(child.id()) {
                rss.push(kib);
            }
        } else {
            failures += 1;
        }
        drop(c);
        stop(&mut child);
    }
    Ok(serde_json::json!({
        "mode": "coldstart",
        "runs": a.runs,
        "failures": failures,
        "ready": summary(&mut ready_us),
        "idle_rss": summary_in(&mut rss, "kib"),
    }))
}
