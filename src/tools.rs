//! The `boxsub-tools` binary's commands: the benchmark (`bench`), the bare warp server it
//! measures against (`bare-server`), and the seeding of large stores (`seed`). They are built
//! only with the cargo feature `tools`, so that the `boxsub` binary operators deploy carries
//! the service alone. Must not touch: the service's own command line ([`crate::config`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// boxsub-tools: measure boxsub and fill stores for measurements. Not for production hosts.
#[derive(Debug, Parser)]
#[command(name = "boxsub-tools", version)]
pub struct ToolsCli {
    /// What to do.
    #[command(subcommand)]
    pub command: ToolCommand,
}

/// The tools' commands.
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Benchmark a bare warp server and boxsub on this machine, in one run (boxsub is the
    /// `boxsub` binary beside this one).
    Bench(BenchConfig),
    /// Write a store of N customers with one order each (for measurements at scale).
    Seed(SeedConfig),
    /// The benchmark's bare warp server (started by `bench`).
    #[command(hide = true)]
    BareServer {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
    },
}

/// Settings of `boxsub-tools bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchConfig {
    /// Measured seconds per run.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Unmeasured warm-up seconds before each run.
    #[arg(long, default_value_t = 3.0)]
    pub warmup: f64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Runs of each scenario, each beside a bare-server run.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Customers in the large store whose restart time, memory and per-request cost at scale
    /// are measured (0 skips it).
    #[arg(long, default_value_t = 1_000_000)]
    pub restart_customers: u64,
    /// Orders of each customer in that store. Above 1, a store with one order per customer
    /// is seeded too, so that memory per order can be told from memory per customer.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub restart_orders_per_customer: u64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run only the scenarios whose names contain this text.
    #[arg(long)]
    pub only: Option<String>,
}

/// Settings of `boxsub-tools seed`.
#[derive(Debug, Clone, Args)]
pub struct SeedConfig {
    /// How many customers.
    #[arg(long, default_value_t = 1_000_000)]
    pub customers: u64,
    /// Orders of each customer: weekly, on the delivery service's days in turn. Customer n's
    /// orders get ids (n-1)*K+1 to n*K.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub orders_per_customer: u64,
    /// An empty data directory to fill.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Catalogue whose first webstore the customers belong to (default: the demo catalogue).
    #[arg(long)]
    pub catalogue: Option<PathBuf>,
}

/// Runs one tool to completion.
pub async fn run(command: ToolCommand) -> ExitCode {
    let outcome = match command {
        ToolCommand::Bench(config) => bench(&config).await,
        ToolCommand::Seed(config) => seed(&config),
        ToolCommand::BareServer { addr } => crate::bench::bare_server(&addr).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("boxsub-tools: {message}");
            ExitCode::FAILURE
        }
    }
}

fn seed(config: &SeedConfig) -> Result<(), String> {
    let done = crate::seed::run(config)?;
    println!(
        "seeded {} customers and {} orders in {:.1} s",
        done.customers, done.orders, done.seconds
    );
    Ok(())
}

async fn bench(config: &BenchConfig) -> Result<(), String> {
    let report = crate::bench::run(config).await?;
    println!("{}", crate::bench::markdown(&report));
    if let Some(path) = &config.json {
        let json = serde_json::to_vec_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let errors: u64 = report.scenarios.iter().map(|s| s.errors).sum();
    if errors > 0 {
        return Err(format!(
            "{errors} benchmark requests did not get the expected status"
        ));
    }
    Ok(())
}
