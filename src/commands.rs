//! The program's commands as the binary runs them: what each prints and its exit code.
//! `main` only parses the command line and sets up logging; `serve`'s wiring is in
//! [`crate::startup`].

use std::io::Write;
use std::process::ExitCode;

use crate::config::{BenchConfig, Command, SeedConfig, ServeConfig};
use crate::startup::{shutdown_signal, Application};

/// Runs one command to completion.
pub async fn run(command: Command) -> ExitCode {
    let outcome = match command {
        Command::Serve(config) => serve(&config).await,
        Command::Keygen => keygen(),
        Command::CheckCatalogue { file } => check_catalogue(&file),
        Command::Seed(config) => seed(&config),
        Command::Bench(config) => bench(&config).await,
        Command::BareServer { addr } => crate::bench::bare_server(&addr).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("boxsub: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: &ServeConfig) -> Result<(), String> {
    // Installed before the listening line, which tells a supervisor it may signal us.
    let shutdown = shutdown_signal();
    let app = Application::build(config)
        .await
        .map_err(|e| e.to_string())?;
    {
        let mut stdout = std::io::stdout().lock();
        for line in app.banner() {
            let _ = writeln!(stdout, "{line}");
        }
        let _ = writeln!(stdout, "listening on http://{}", app.addr());
        let _ = stdout.flush();
    }
    app.run_until_stopped(shutdown).await;
    Ok(())
}

fn check_catalogue(file: &std::path::Path) -> Result<(), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("reading {}: {error}", file.display()))?;
    match crate::domain::catalogue::Catalogue::parse(&text, 0) {
        Ok(catalogue) => {
            println!(
                "{}: a valid catalogue of {} webstores",
                file.display(),
                catalogue.webstores().len()
            );
            Ok(())
        }
        Err(error) => {
            for problem in &error.problems {
                println!("{}: {problem}", file.display());
            }
            Err(format!(
                "{}: {} problem(s)",
                file.display(),
                error.problems.len()
            ))
        }
    }
}

fn keygen() -> Result<(), String> {
    let pair = crate::keygen::generate().map_err(|e| format!("no randomness available: {e}"))?;
    println!("key: {}", pair.key);
    println!("secret: {}", pair.secret);
    println!("secret_sha256: {}", pair.secret_sha256);
    Ok(())
}

fn seed(config: &SeedConfig) -> Result<(), String> {
    let done = crate::startup::seed(config).map_err(|e| e.to_string())?;
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
