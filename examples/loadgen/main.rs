//! Benchmark load generator for `make bench`: open-loop fixed-rate load, SSE timing,
//! many held streams, and cold start. Each mode prints one JSON object on stdout.
//!
//! ```text
//! loadgen open      --url U --rate 1000 --duration 10s [--warmup 2s] [--split-header H --split-contains S]
//! loadgen sse       --url U --count 200
//! loadgen hold      --url U --streams 10000 --pid PID
//! loadgen coldstart --ready URL [--runs 5] -- BIN ARGS...
//! ```
//! Common request flags: `--body STR`, `--header 'Name: value'` (repeatable). A body makes
//! the request a POST with `content-type: application/json`, otherwise it is a GET.

mod open;
mod procs;
mod streams;

use std::time::Duration;

use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[derive(Parser)]
#[command(about = "Load generator for the switchyard benchmarks (127.0.0.1 only)")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Open-loop load at a fixed rate; latency measured from each request's scheduled start.
    Open(open::OpenArgs),
    /// Sequential streaming requests: time to first body byte and to the last byte.
    Sse(streams::SseArgs),
    /// Hold many concurrent streams, sample the target's RSS, count clean completions.
    Hold(streams::HoldArgs),
    /// Start a binary, time exec -> ready URL 200, then read its idle RSS.
    Coldstart(procs::ColdArgs),
}

/// The request every mode sends.
#[derive(Args, Clone)]
pub struct Target {
    /// Target URL (must be on 127.0.0.1).
    #[arg(long)]
    url: Uri,
    /// Request body; makes the request a POST.
    #[arg(long)]
    body: Option<String>,
    /// Extra header, `Name: value`; repeatable.
    #[arg(long = "header")]
    headers: Vec<String>,
    /// Per-request timeout.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

/// A parsed [`Target`], cheap to turn into requests.
#[derive(Clone)]
pub struct Prepared {
    url: Uri,
    body: Option<Bytes>,
    headers: Vec<(HeaderName, HeaderValue)>,
    timeout: Duration,
}

impl Target {
    pub fn prepare(&self) -> anyhow::Result<Prepared> {
        match self.url.host() {
            Some("127.0.0.1") | Some("localhost") => {}
            other => anyhow::bail!("refusing non-loopback target host {other:?}"),
        }
        let mut headers = Vec::new();
        for h in &self.headers {
            let (n, v) = h
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("header without ':': {h}"))?;
            headers.push((
                HeaderName::from_bytes(n.trim().as_bytes())?,
                HeaderValue::from_str(v.trim())?,
            ));
        }
        Ok(Prepared {
            url: self.url.clone(),
            body: self.body.clone().map(Bytes::from),
            headers,
            timeout: self.timeout,
        })
    }
}

impl Prepared {
    pub fn request(&self) -> anyhow::Result<Request<Full<Bytes>>> {
        let method = if self.body.is_some() {
            Method::POST
        } else {
            Method::GET
        };
        let mut b = Request::builder().method(method).uri(self.url.clone());
        if self.body.is_some() {
            b = b.header(http::header::CONTENT_TYPE, "application/json");
        }
        for (n, v) in &self.headers {
            b = b.header(n, v);
        }
        Ok(b.body(Full::new(self.body.clone().unwrap_or_default()))?)
    }
}

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A pooled HTTP/1.1 client with TCP_NODELAY.
pub fn client(max_idle: usize) -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    c.set_connect_timeout(Some(Duration::from_secs(10)));
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(max_idle)
        .pool_idle_timeout(Duration::from_secs(60))
        .build(c)
}

/// Percentile summary of microsecond samples (nearest-rank), as JSON.
pub fn summary(samples: &mut [u64]) -> serde_json::Value {
    summary_in(samples, "us")
}

/// Like [`summary`], with the keys suffixed by `unit` (`p50_kib`, ...).
pub fn summary_in(samples: &mut [u64], unit: &str) -> serde_json::Value {
    samples.sort_unstable();
    let n = samples.len();
    let pct = |q: f64| -> u64 {
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        samples[rank - 1]
    };
    let mean = if n == 0 {
        0.0
    } else {
        samples.iter().sum::<u64>() as f64 / n as f64
    };
    let mut m = serde_json::Map::new();
    m.insert("n".into(), n.into());
    m.insert(format!("mean_{unit}"), mean.round().into());
    for (k, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
        m.insert(format!("{k}_{unit}"), pct(q).into());
    }
    m.insert(format!("max_{unit}"), pct(1.0).into());
    m.into()
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(async move {
        match cli.mode {
            Mode::Open(a) => open::run(a).await,
            Mode::Sse(a) => streams::sse(a).await,
            Mode::Hold(a) => streams::hold(a).await,
            Mode::Coldstart(a) => procs::coldstart(a).await,
        }
    })?;
    println!("{out}");
    Ok(())
}
