//! The `switchyard` command line: serve, check, explain. No logic beyond argument handling.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// mimalloc instead of glibc malloc: the request path allocates and frees many small
/// buffers across worker threads, where glibc's arenas (malloc_consolidate, unlink_chunk)
/// showed up as ~11 % of the gateway's CPU in the issue-9 profile.
#[cfg(not(feature = "count-allocs"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The bench build (`--features count-allocs`) counts allocations on top of mimalloc
/// (`switchyard_allocations_total` on `/metrics`; benches/callgrind.sh).
#[cfg(feature = "count-allocs")]
#[global_allocator]
static GLOBAL: switchyard::telemetry::allocs::Counting = switchyard::telemetry::allocs::Counting;

/// mimalloc (v3) commits its arenas eagerly on Linux by default, which measured here as
/// +10 MiB idle RSS and ~75 instead of ~48 KB per held stream; committing on demand costs
/// no measurable CPU (make bench). The option is read when the allocator initialises, at
/// the first allocation — before `main` — so it is set from an ELF constructor, which runs
/// before the Rust runtime allocates anything. `mi_option_arena_eager_commit` is 4 in
/// mimalloc's `mi_option_e`.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static LAZY_COMMIT: extern "C" fn() = lazy_commit;

#[cfg(target_os = "linux")]
extern "C" fn lazy_commit() {
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    // SAFETY: a plain option setter of the linked allocator; any value is valid.
    unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) }
}

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "LLM API gateway with safe failover and hot-reloaded routing"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (for the default `serve`).
    #[arg(long, global = true, default_value = "./switchyard.yaml")]
    config: PathBuf,
    /// Log line format on stderr: `text` for people, `json` (one object per line, fields at
    /// the top level) for journald and log shippers. The level is set with SWITCHYARD_LOG.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Serving threads for `serve`: each serves its share of the client connections on a
    /// runtime of its own (default: one per core the process may use; at most 64).
    #[arg(long, global = true)]
    workers: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (the default).
    Serve,
    /// Validate a config file without starting; exits non-zero on errors.
    Check {
        /// Print the effective settings of every channel.
        #[arg(long)]
        explain: bool,
    },
    /// Show candidate tiers and the attempt order for a client and model, from the file
    /// (no live state); exits non-zero when nothing serves the model.
    Explain {
        /// Client name (a key of `clients`).
        #[arg(long)]
        client: String,
        /// Public model name the client would send.
        #[arg(long)]
        model: Option<String>,
        /// Request path, for pass-through paths without a model.
        #[arg(long)]
        path: Option<String>,
    },
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| "info".into());
    // Colour only on a terminal: log files and journald get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Check { explain } => match switchyard::config::load(&cli.config) {
            Ok(cfg) => {
                if explain {
                    print!("{}", switchyard::config::explain(&cfg));
                }
                println!(
                    "{}: ok ({} channels, {} clients)",
                    cli.config.display(),
                    cfg.channels.len(),
                    cfg.clients.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Command::Explain {
            client,
            model,
            path,
        } => match switchyard::explain_cmd(&cli.config, &client, model.as_deref(), path.as_deref())
        {
            Ok(text) => {
                println!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Command::Serve => {
            init_logging(cli.log_format);
            // The clients are served on serving threads of their own (`http::cores`); this
            // runtime runs the admin listener, reloads, probes and the background tasks.
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let threads = switchyard::http::cores::count(cli.workers);
            match rt.block_on(switchyard::app::serve(&cli.config, threads)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    // Logging writes to stderr: one line, in the chosen log format.
                    tracing::error!("cannot start: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
