//! The `boxsub-tools` binary's command line and its dispatch: the benchmark (`bench`), the
//! bare warp server and the webhook receiver it starts (`bare-server`, `webhook-receiver`),
//! the producer's delivery day against the API's list (`day-page`), and the seeding of large
//! stores (`seed`). This file owns the commands, what each prints and its exit status; the
//! work is in [`mod@bench`] and [`mod@seed`], each beside the settings it reads ([`BenchConfig`],
//! [`DayPageConfig`], [`SeedConfig`]). Arrows point one way: from here down to `bench` and
//! `seed` (and from `bench` to `seed`), never back to this file. All of it is built only with
//! the cargo feature `tools`, so that the `boxsub` binary operators deploy carries the service
//! alone. Must not touch: the service's own command line ([`crate::config`]).

pub mod bench;
pub mod seed;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use bench::{BenchConfig, DayPageConfig};
use seed::SeedConfig;

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

/// Runs one tool to completion.
pub async fn run(command: ToolCommand) -> ExitCode {
    let outcome = match command {
        ToolCommand::Bench(config) => bench(&config).await,
        ToolCommand::DayPage(config) => day_page(&config).await,
        ToolCommand::Seed(config) => seed(&config),
        ToolCommand::BareServer { addr } => bench::bare_server(&addr).await,
        ToolCommand::WebhookReceiver { addr } => bench::webhook_receiver(&addr).await,
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
    let done = seed::run(config)?;
    println!(
        "seeded {} customers and {} orders in {:.1} s",
        done.customers, done.orders, done.seconds
    );
    Ok(())
}

async fn bench(config: &BenchConfig) -> Result<(), String> {
    let report = bench::run(config).await?;
    println!("{}", bench::markdown(&report));
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
    let report = bench::day_page(config).await?;
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
