//! The `boxsub-tools` binary (cargo feature `tools`): the benchmark, its bare server and the
//! seeding of large stores, kept out of the `boxsub` binary that operators deploy. Logs go
//! to standard error at `RUST_LOG` (default `warn`). This file owns only the allocator, the
//! logging and the runtime; the command line and every tool are in `boxsub::tools`, which it
//! must not duplicate.
//!
//! Must not touch: the tools' command line and the tools themselves (`boxsub::tools`).

use std::process::ExitCode;

use boxsub::tools::ToolsCli;
use clap::Parser;
use tracing_subscriber::EnvFilter;

/// The same allocator as the service, so that the bare server it measures against is
/// measured on equal terms.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = ToolsCli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    boxsub::tools::run(cli.command).await
}
