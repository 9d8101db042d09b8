//! Standalone mock LLM upstream for the demo and benchmarks:
//! `mock_upstream --listen 127.0.0.1:8081 [--name X] [--fault status=503] [--record]`.
//! Prints `listening on ADDR` and serves until SIGTERM or ctrl-c.
use std::net::SocketAddr;

use clap::Parser;
use switchyard::mock::{Behavior, MockUpstream};

#[derive(Parser, Debug)]
#[command(about = "Mock OpenAI/Anthropic upstream with fault injection")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// Value of the `x-mock-name` response header.
    #[arg(long)]
    name: Option<String>,
    /// Default behaviour, in the `x-mock-fault` vocabulary (`status=503`, `stream=20:10ms`, ...).
    #[arg(long)]
    fault: Option<Behavior>,
    /// Require this API key.
    #[arg(long)]
    key: Option<String>,
    /// Keep every request in memory (off by default: the binary serves benchmarks).
    #[arg(long)]
    record: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mock = MockUpstream::start_on(args.listen).await?;
    mock.set_record(args.record);
    if let Some(name) = &args.name {
        mock.set_name(name);
    }
    if let Some(b) = args.fault {
        mock.set_default(b);
    }
    mock.require_key(args.key);
    println!("listening on {}", mock.addr());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    mock.shutdown();
    Ok(())
}
