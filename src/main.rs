//! The `boxsub` binary: parse the command line, set up logging, and run the chosen command.
//! Everything else lives in the library, so tests boot exactly what this runs.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use boxsub::config::{Cli, Command};
use boxsub::startup::{shutdown_signal, Application};
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
    match cli.command {
        Command::Keygen => match boxsub::keygen::generate() {
            Ok(pair) => {
                println!("key: {}", pair.key);
                println!("secret: {}", pair.secret);
                println!("secret_sha256: {}", pair.secret_sha256);
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("boxsub: no randomness available: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Bench(config) => match boxsub::bench::run(&config).await {
            Ok(report) => {
                println!("{}", boxsub::bench::markdown(&report));
                if let Some(path) = &config.json {
                    let json = serde_json::to_vec_pretty(&report).unwrap_or_default();
                    if let Err(error) = std::fs::write(path, json) {
                        eprintln!("boxsub: writing {}: {error}", path.display());
                        return ExitCode::FAILURE;
                    }
                }
                let errors: u64 = report.scenarios.iter().map(|s| s.errors).sum();
                if errors > 0 {
                    eprintln!("boxsub: {errors} requests did not get the expected status");
                    return ExitCode::FAILURE;
                }
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("boxsub bench: {error}");
                ExitCode::FAILURE
            }
        },
        Command::BareServer { addr } => match boxsub::bench::bare_server(&addr).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("boxsub: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Seed(config) => match boxsub::startup::seed(&config) {
            Ok(done) => {
                println!(
                    "seeded {} customers and {} orders in {:.1} s",
                    done.customers, done.orders, done.seconds
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("boxsub: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Serve(config) => match Application::build(&config).await {
            Ok(app) => {
                let mut stdout = std::io::stdout().lock();
                for line in app.banner() {
                    let _ = writeln!(stdout, "{line}");
                }
                let _ = writeln!(stdout, "listening on http://{}", app.addr());
                let _ = stdout.flush();
                drop(stdout);
                app.run_until_stopped(shutdown_signal()).await;
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("boxsub: {error}");
                ExitCode::FAILURE
            }
        },
    }
}
