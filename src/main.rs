//! The `boxsub` binary: parse the command line, set up logging, and run the chosen command.
//! Everything else lives in the library, so tests boot exactly what this runs.

use std::io::IsTerminal;
use std::process::ExitCode;

use boxsub::config::Cli;
use clap::Parser;

/// sled allocates and frees on every write; mimalloc keeps that off a contended lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    boxsub::commands::run(cli.command).await
}
