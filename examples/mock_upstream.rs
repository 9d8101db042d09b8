//! Standalone mock LLM upstream for the demo and benchmarks:
//! `mock_upstream --listen 127.0.0.1:8081 [--name X] [--fault status=503] [--record]
//! [--flavour native|chat-only|deepseek-thinking]`.
//! Prints `listening on ADDR` and serves until SIGTERM or ctrl-c. Requests are validated as
//! the flavour's providers do; `TOOLTEST:` / `READTEST:` prompts run scripted tool loops.
use std::net::SocketAddr;

use clap::Parser;
use switchyard_mock::{Behavior, Flavour, MockUpstream};

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
    /// Which provider to play: `native` (each endpoint as its own provider), `chat-only`
    /// (vLLM-like: no /v1/responses, no /v1/messages), `deepseek-thinking`.
    #[arg(long, default_value = "native")]
    flavour: Flavour,
    /// Log each refused request's path and error body on stderr.
    #[arg(long)]
    log_refusals: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mock = MockUpstream::start_on(args.listen).await?;
    mock.set_record(args.record || args.log_refusals);
    mock.set_flavour(args.flavour);
    if let Some(name) = &args.name {
        mock.set_name(name);
    }
    if let Some(b) = args.fault {
        mock.set_default(b);
    }
    mock.require_key(args.key);
    println!("listening on {}", mock.addr());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let log = async {
        let mut seen = 0;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let reqs = mock.requests();
            for r in reqs.iter().skip(seen) {
                match &r.refusal {
                    Some(why) => eprintln!("refused {} {}: {why}", r.method, r.path),
                    None => eprintln!("served {} {}", r.method, r.path),
                }
            }
            seen = reqs.len();
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = log, if args.log_refusals => {}
    }
    mock.shutdown();
    Ok(())
}
