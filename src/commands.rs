//! The program's commands as the binary runs them: what each prints and its exit code.
//! `main` only parses the command line and sets up logging; `serve`'s wiring is in
//! [`crate::startup`].
//!
//! Must not touch: parsing the command line (`crate::config`), `serve`'s wiring
//! (`crate::startup`), the rules of what the commands do (the library's modules).

use std::io::Write;
use std::process::ExitCode;

use std::path::Path;
use std::sync::Arc;

use crate::config::{Command, ExportConfig, ImportConfig, ServeConfig};
use crate::startup::{shutdown_signal, Application};
use crate::store::disk::Reserve;
use crate::store::{Durability, Store, StoreError, StoreOptions};
use crate::transfer::Progress;

/// Runs one command to completion.
pub async fn run(command: Command) -> ExitCode {
    let outcome = match command {
        Command::Serve(config) => serve(&config).await,
        Command::Keygen => keygen(),
        Command::HashPassword => hash_password(),
        Command::CheckCatalogue { file } => check_catalogue(&file),
        Command::Export(config) => export(&config),
        Command::Import(config) => import(&config),
        Command::MoveWebstore {
            webstore,
            placement,
            to,
            admin_token_file,
            max_freeze,
        } => move_webstore(&webstore, &placement, &to, &admin_token_file, max_freeze).await,
        Command::HaproxyConfig {
            placement,
            catalogue,
        } => haproxy_config(&placement, &catalogue),
        Command::ChangelogUser { output } => changelog_user(&output),
        Command::WebhookSecret => webhook_secret(),
        Command::RedeliverWebhook {
            webstore,
            endpoint,
            after,
            admin,
            admin_token_file,
        } => {
            redeliver_webhook(
                &webstore,
                &endpoint,
                after.as_deref(),
                &admin,
                &admin_token_file,
            )
            .await
        }
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
        if let Some(admin) = app.admin_addr() {
            let _ = writeln!(stdout, "admin listening on http://{admin}");
        }
        let _ = writeln!(stdout, "listening on http://{}", app.addr());
        let _ = stdout.flush();
    }
    app.run_until_stopped(shutdown).await;
    Ok(())
}

/// `boxsub move-webstore`: the move, each step said on standard output as it is done.
async fn move_webstore(
    webstore: &str,
    placement: &std::path::Path,
    to: &str,
    token_file: &std::path::Path,
    max_freeze: std::time::Duration,
) -> Result<(), String> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|error| format!("reading {}: {error}", token_file.display()))?;
    let mut say = |line: &str| {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    };
    crate::sharding::move_webstore::move_webstore(
        webstore,
        placement,
        to,
        token.trim(),
        max_freeze,
        &mut say,
    )
    .await
}

/// `boxsub haproxy-config`: checks the placement file against the catalogue, writes the map
/// file, prints the configuration.
fn haproxy_config(placement: &std::path::Path, catalogue: &std::path::Path) -> Result<(), String> {
    use crate::sharding::{haproxy, placement::PlacementFile};
    let text = std::fs::read_to_string(catalogue)
        .map_err(|error| format!("reading {}: {error}", catalogue.display()))?;
    let catalogue = crate::domain::catalogue::Catalogue::parse(&text, 0)
        .map_err(|error| format!("{}: {error}", catalogue.display()))?;
    let file = PlacementFile::read(placement)?;
    let problems = file.check(&catalogue);
    if !problems.is_empty() {
        return Err(format!(
            "{}:\n  {}",
            placement.display(),
            problems.join("\n  ")
        ));
    }
    crate::sharding::placement::write_atomically(
        &file.haproxy_map,
        haproxy::map_file(&file, &catalogue).as_bytes(),
    )?;
    crate::sharding::placement::write_atomically(
        &file.webstore_map(),
        haproxy::webstore_map_file(&file).as_bytes(),
    )?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(haproxy::config(&file).as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|error| format!("writing the configuration: {error}"))?;
    eprintln!(
        "boxsub: wrote the API-key map {} and the webstore map {} ({} webstores on {} shards)",
        file.haproxy_map.display(),
        file.webstore_map().display(),
        file.webstores.len(),
        file.shards.len()
    );
    Ok(())
}

/// `boxsub hash-password`: the first line of standard input (without its line end), hashed.
fn hash_password() -> Result<(), String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|error| format!("reading the password: {error}"))?;
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        return Err("no password on standard input".into());
    }
    let salt: [u8; 16] =
        crate::random::secret().map_err(|error| format!("random salt: {error}"))?;
    let hash = crate::domain::password::hash_password(password, &salt)?;
    println!("{hash}");
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

/// `boxsub changelog-user`: a new nkey user's seed into `output` (created, mode 0600, never
/// over an existing file), and its public key on standard output.
fn changelog_user(output: &Path) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let user = crate::replication::changelog::new_user();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(output)
        .map_err(|error| format!("creating {}: {error}", output.display()))?;
    file.write_all(format!("{}\n", user.seed).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("writing {}: {error}", output.display()))?;
    println!("{}", user.public_key);
    Ok(())
}

/// `boxsub webhook-secret`: a new signing secret on standard output.
fn webhook_secret() -> Result<(), String> {
    let secret = crate::webhooks::signing::new_secret()
        .map_err(|error| format!("no randomness for the secret: {error}"))?;
    println!("{secret}");
    Ok(())
}

/// `boxsub redeliver-webhook`: asks the node that serves the webstore to redeliver.
async fn redeliver_webhook(
    webstore: &str,
    endpoint: &str,
    after: Option<&str>,
    admin: &[String],
    token_file: &Path,
) -> Result<(), String> {
    let token = std::fs::read_to_string(token_file)
        .map_err(|error| format!("reading {}: {error}", token_file.display()))?;
    let client = crate::sharding::admin_client::AdminClient::new(token.trim());
    let (addr, _) = client.reachable(admin, webstore).await?;
    let query = match after {
        Some(after) => format!(
            "?{}",
            serde_urlencoded::to_string([("after", after)]).map_err(|error| error.to_string())?
        ),
        None => String::new(),
    };
    let path = format!("/admin/webstores/{webstore}/webhooks/{endpoint}/redeliver{query}");
    let answer = client
        .request(&addr, "POST", &path, bytes::Bytes::new())
        .await?;
    if answer.status != 202 {
        return Err(format!(
            "{addr} answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    println!(
        "{webstore}/{endpoint}: redelivering the events after sequence {} (asked of {addr})",
        answer.json()["redeliver_after"]
    );
    Ok(())
}

/// Opens a stopped server's store for a tool: it never waits for durability per write (the
/// tool flushes once at its end) and a failed flush is reported, not fatal to a process
/// that serves no one.
fn open_for_tool(data_dir: &Path, reserve: Reserve) -> Result<Store, String> {
    let options = StoreOptions {
        durability: Durability::Unlogged,
        cache_bytes: 64 << 20,
        reserve,
    };
    let report = Arc::new(|error: &StoreError| eprintln!("boxsub: {error}"));
    Store::open(data_dir, options, report)
        .map_err(|error| format!("data directory {}: {error}", data_dir.display()))
}

fn export(config: &ExportConfig) -> Result<(), String> {
    if !config.data_dir.join("db").exists() {
        return Err(format!(
            "{} holds no boxsub store (no `db` file)",
            config.data_dir.display()
        ));
    }
    // Reading writes nothing, so no free-space reserve applies.
    let store = open_for_tool(&config.data_dir, Reserve::Bytes(0))?;
    let mut progress = Progress::on_stderr("export");
    let written = match &config.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|error| format!("creating {}: {error}", path.display()))?;
            let mut out = std::io::BufWriter::new(file);
            let written = crate::transfer::export::export(
                &store,
                config.webstore.as_deref(),
                &mut out,
                &mut progress,
            );
            out.into_inner()
                .map_err(|error| error.to_string())
                .and_then(|file| file.sync_all().map_err(|error| error.to_string()))
                .map_err(|error| format!("writing {}: {error}", path.display()))?;
            written
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            crate::transfer::export::export(
                &store,
                config.webstore.as_deref(),
                &mut out,
                &mut progress,
            )
        }
    }
    .map_err(|error| error.to_string())?;
    // Closing puts back the clean-shutdown marker opening took away.
    store
        .close()
        .map_err(|error| format!("closing {}: {error}", config.data_dir.display()))?;
    if config.webstore.is_some() && written.customers == 0 {
        eprintln!(
            "boxsub: webstore {} has no customers in this store",
            config.webstore.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

fn import(config: &ImportConfig) -> Result<(), String> {
    // An export comes from a file, or from standard input spooled to one: an import reads
    // its input twice (once to check it, once to write it).
    let spooled;
    let input = match &config.input {
        Some(path) => path.clone(),
        None => {
            spooled = Spool::from_stdin()?;
            spooled.0.clone()
        }
    };
    let store = open_for_tool(&config.data_dir, crate::store::disk::DEFAULT_RESERVE)?;
    let mut progress = Progress::on_stderr("import");
    let imported = crate::transfer::import::import(&store, &input, &mut progress)
        .map_err(|error| format!("import refused: {error}"))?;
    println!(
        "imported {} customers, {} orders, {} idempotency records, {} events, {} webhook \
         positions and {} producer sessions of {}",
        imported.customers,
        imported.orders,
        imported.idempotency_records,
        imported.events,
        imported.webhook_positions,
        imported.sessions,
        if imported.webstores.is_empty() {
            "no webstore".to_owned()
        } else {
            imported.webstores.join(", ")
        }
    );
    Ok(())
}

/// Standard input copied to a temporary file, removed when dropped.
struct Spool(std::path::PathBuf);

impl Spool {
    fn from_stdin() -> Result<Spool, String> {
        let path = std::env::temp_dir().join(format!("boxsub-import-{}.jsonl", std::process::id()));
        let spool = Spool(path);
        let mut file = std::fs::File::create(&spool.0).map_err(|error| {
            format!("spooling standard input to {}: {error}", spool.0.display())
        })?;
        std::io::copy(&mut std::io::stdin().lock(), &mut file)
            .map_err(|error| format!("reading standard input: {error}"))?;
        Ok(spool)
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
