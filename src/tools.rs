//! The `boxsub-tools` binary's commands: the benchmark (`bench`), the bare warp server and
//! the webhook receiver it starts (`bare-server`, `webhook-receiver`), the producer's
//! delivery day against the API's list (`day-page`), and the seeding of large stores
//! (`seed`). They are built only with the cargo feature `tools`, so that the `boxsub` binary
//! operators deploy carries the service alone. Must not touch: the service's own command line
//! ([`crate::config`]).

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
    /// Time a producer's whole delivery day in the web app (page and CSV) beside the API's
    /// delivery list of the same day, one request at a time, on a day of N deliveries.
    DayPage(DayPageConfig),
    /// Write a store of N customers with one order each (for measurements at scale).
    Seed(SeedConfig),
    /// The benchmark's bare warp server (started by `bench`).
    #[command(hide = true)]
    BareServer {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: String,
    },
    /// The benchmark's webhook receiver (started by `bench`).
    #[command(hide = true)]
    WebhookReceiver {
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
    /// Run only the scenarios whose names contain this text (`noisy_neighbour` is one).
    #[arg(long)]
    pub only: Option<String>,
    /// Connections of webstore A's flood in the noisy-neighbour scenario.
    #[arg(long, default_value_t = 512)]
    pub flood_connections: usize,
    /// The `--admission-slots` of the noisy-neighbour scenario's servers, one server each
    /// (`default`: the service's default; 100000: more than any flood, no fair admission).
    #[arg(long, value_delimiter = ',', default_value = "default,100000")]
    pub noisy_admission_slots: Vec<String>,
}

/// Settings of `boxsub-tools day-page`.
#[derive(Debug, Clone, Args)]
pub struct DayPageConfig {
    /// Deliveries on the day measured (one customer with one weekly order each).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub deliveries: u64,
    /// Measured runs of each read (after one unmeasured run of each).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
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
        ToolCommand::DayPage(config) => day_page(&config).await,
        ToolCommand::Seed(config) => seed(&config),
        ToolCommand::BareServer { addr } => crate::bench::bare_server(&addr).await,
        ToolCommand::WebhookReceiver { addr } => crate::bench::webhook_receiver(&addr).await,
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
    write_json(config.json.as_deref(), &report)?;
    let errors: u64 = report.scenarios.iter().map(|s| s.errors).sum::<u64>()
        + report
            .noisy_neighbour
            .as_ref()
            .map_or(0, |noisy| noisy.errors());
    if errors > 0 {
        return Err(format!(
            "{errors} benchmark requests did not get the expected status"
        ));
    }
    Ok(())
}

async fn day_page(config: &DayPageConfig) -> Result<(), String> {
    // Every request is checked as it is answered: a wrong status ends the run with an error.
    let report = crate::bench::day_page(config).await?;
    println!("{}", report.markdown());
    write_json(config.json.as_deref(), &report)?;
    Ok(())
}

/// Writes `report` as JSON to `path`, if one was given.
fn write_json(
    path: Option<&std::path::Path>,
    report: &impl serde::Serialize,
) -> Result<(), String> {
    let Some(path) = path else {
        return Ok(());
    };
    let json = serde_json::to_vec_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::ToolsCli;
    use crate::config::documented::{commands_section, missing};

    #[test]
    fn every_boxsub_tools_command_is_in_docs_operations_md_commands() {
        let missing = missing(&ToolsCli::command(), commands_section());
        assert!(
            missing.is_empty(),
            "docs/operations.md \"### Commands\" does not name `boxsub-tools` {missing:?}"
        );
    }
}
