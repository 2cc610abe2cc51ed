//! Command-line and environment configuration: the only place that reads either.
//!
//! Must not touch: what the settings do (each layer takes its own settings from here,
//! through `crate::startup`), environment or arguments read anywhere else.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::domain::ids::IdRange;
use crate::store::disk::Reserve;

/// The default data directory: `snapshots`, a name the product's contract fixes (`boxsub
/// serve` without `--data-dir` keeps its state there, and clients and operators count on
/// it). It is the whole state of a node, not only snapshots: the sled store, the write-ahead
/// log (`wal/`), the store's markers and, unless `--backup-dir` says otherwise, the online
/// backups (`backups/`). The repository's `snapshots/` directory is this default for a
/// server run from a checkout; its README says what lives there.
pub const DEFAULT_DATA_DIR: &str = "snapshots";

/// boxsub: box-subscription ordering service.
#[derive(Debug, Parser)]
#[command(name = "boxsub", version, about)]
pub struct Cli {
    /// Log lines as `text` (one readable line each) or `json` (one JSON object each); the
    /// level comes from `RUST_LOG` (default `info`).
    #[arg(long, env = "BOXSUB_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The values of `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where `GET /metrics` is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsAt {
    /// On the API's own address.
    Main,
    /// Nowhere.
    Off,
    /// On an address of its own (the API's address then answers 404 to it).
    Address(String),
}

fn parse_public_url(text: &str) -> Result<String, String> {
    crate::app::PublicOrigin::parse(Some(text))?;
    Ok(text.trim().to_owned())
}

fn parse_metrics_at(text: &str) -> Result<MetricsAt, String> {
    match text.trim() {
        "main" => Ok(MetricsAt::Main),
        "off" => Ok(MetricsAt::Off),
        address if address.parse::<std::net::SocketAddr>().is_ok() => {
            Ok(MetricsAt::Address(address.to_owned()))
        }
        other => Err(format!(
            "{other:?}: give `main`, `off`, or an address such as 127.0.0.1:9187"
        )),
    }
}

/// The program's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service.
    Serve(Box<ServeConfig>),
    /// Print a new random API key, its secret, and the secret's SHA-256 for a catalogue.
    Keygen,
    /// Read a password on standard input and print its argon2id PHC string (OWASP
    /// parameters), for a producer's `password_hash` in the catalogue.
    HashPassword,
    /// Check a catalogue file and print every problem with its place; exits non-zero if it
    /// has any.
    CheckCatalogue {
        /// The catalogue file.
        file: PathBuf,
    },
    /// Write a stopped server's store, or one webstore of it, as JSON lines (customers with
    /// their password hashes, orders, idempotency records).
    Export(ExportConfig),
    /// Read an export into a stopped server's store: refused, writing nothing, if anything in
    /// it would collide with what the store holds.
    Import(ImportConfig),
    /// Move a webstore between running shards (copy while its writes go on, catch up, freeze
    /// for the last changes, hand over, take, switch HAProxy's map, release, rewrite the
    /// placement and map files); safe to run again after any failure.
    MoveWebstore {
        /// The webstore's id.
        webstore: String,
        /// The placement file (rewritten once the move is done).
        #[arg(long)]
        placement: PathBuf,
        /// The shard to move it to.
        #[arg(long)]
        to: String,
        /// The file holding the admin listeners' bearer token.
        #[arg(long, env = "BOXSUB_ADMIN_TOKEN_FILE")]
        admin_token_file: PathBuf,
        /// The longest the webstore's writes may be refused before the hand-over, in seconds:
        /// a cut-over that takes longer is called off, and the source takes them again.
        #[arg(long, default_value = "2", value_parser = parse_seconds)]
        max_freeze: Duration,
    },
    /// Write a new NATS user nkey seed for a node of a replicated group into FILE (readable
    /// by its owner only; refused if FILE exists) and print the user's public key, for the
    /// NATS servers' `authorization` block. The node connects with `--changelog-creds FILE`.
    ChangelogUser {
        /// The file to write the seed into.
        #[arg(long)]
        output: PathBuf,
    },
    /// Print a new webhook signing secret (`whsec_` and 32 random bytes in base64) for a
    /// webhook endpoint's `secrets` in the catalogue.
    WebhookSecret,
    /// Ask a running node to deliver a webstore's events again to one webhook endpoint, from
    /// a cursor of the events feed (from the oldest kept without one); a disabled endpoint is
    /// enabled. Prints where the endpoint starts from.
    RedeliverWebhook {
        /// The webstore's id.
        #[arg(long)]
        webstore: String,
        /// The webhook endpoint's id (the catalogue's `webhooks[].id`).
        #[arg(long)]
        endpoint: String,
        /// The feed cursor to deliver after (the `next` of a page of `GET /v1/events`, or an
        /// endpoint's `cursor` in `GET /admin/webstores/ID/webhooks`).
        #[arg(long)]
        after: Option<String>,
        /// The admin listeners (host:port) of the nodes that may serve the webstore (a
        /// group's nodes: its primary answers).
        #[arg(long, value_delimiter = ',', required = true)]
        admin: Vec<String>,
        /// The file holding the admin listeners' bearer token.
        #[arg(long)]
        admin_token_file: PathBuf,
    },
    /// Print the `haproxy.cfg` that routes each webstore's API keys to its shard, from a
    /// placement file, and write the API-key map file the placement file names.
    HaproxyConfig {
        /// The placement file (JSON: shards, and the shard of each webstore).
        #[arg(long)]
        placement: PathBuf,
        /// The catalogue (for each webstore's API keys).
        #[arg(long, env = "BOXSUB_CATALOGUE")]
        catalogue: PathBuf,
    },
}

/// Settings of `boxsub export`.
#[derive(Debug, Clone, Args)]
pub struct ExportConfig {
    /// The data directory of a stopped server.
    #[arg(long, env = "BOXSUB_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Export only this webstore (by its catalogue id).
    #[arg(long)]
    pub webstore: Option<String>,
    /// The file to write (default: standard output).
    #[arg(long)]
    pub output: Option<PathBuf>,
}

/// Settings of `boxsub import`.
#[derive(Debug, Clone, Args)]
pub struct ImportConfig {
    /// The data directory of a stopped server (created when missing).
    #[arg(long, env = "BOXSUB_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// The export to read (default: standard input).
    #[arg(long)]
    pub input: Option<PathBuf>,
}

/// Settings of `boxsub serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "BOXSUB_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: String,
    /// Directory for the service's whole state: the store, its write-ahead log and, by
    /// default, online backups (the default's name, `snapshots`, is the contract's).
    #[arg(long, env = "BOXSUB_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Catalogue JSON file; without it the built-in demo catalogue is used.
    #[arg(long, env = "BOXSUB_CATALOGUE")]
    pub catalogue: Option<PathBuf>,
    /// API requests in service at once (handed to the actors and the log) while webstores
    /// contend for the host; a webstore alone is never held back. Past them, requests wait
    /// in one queue per webstore and are admitted a webstore at a time in turn, so that one
    /// webstore's flood cannot hold up another's requests.
    #[arg(long, env = "BOXSUB_ADMISSION_SLOTS", default_value_t = 32,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub admission_slots: u64,
    /// Deadline, in milliseconds, for each call to a customer actor.
    #[arg(long, env = "BOXSUB_CALL_TIMEOUT_MS", default_value_t = 5000)]
    pub call_timeout_ms: u64,
    /// `on`: a write is answered only once it is on disk. `off`: answered at once, the
    /// write-ahead log synced in the background at most once every --commit-interval-us
    /// (less CPU a write; a crash loses the writes of the last moment, a graceful stop none).
    #[arg(long, env = "BOXSUB_DURABILITY", value_enum, default_value_t = DurabilityFlag::On)]
    pub durability: DurabilityFlag,
    /// How long, in microseconds from the start of a busy sync, the next may wait for
    /// writers to gather. With durability on, while the workers have no time to spare, a
    /// sync starts at most once an interval; otherwise, after a sync that answered 24 writers
    /// or more, the next waits for three quarters as many (at least 24). A sync costs the
    /// same CPU however many writes it covers, so under heavy load this saves CPU per write
    /// and raises throughput; fewer concurrent writers with CPU to spare never wait. With
    /// durability off, a sync starts at most once an interval whatever the load. 0 syncs as
    /// soon as the previous sync ends.
    #[arg(long, env = "BOXSUB_COMMIT_INTERVAL_US", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub commit_interval_us: u64,
    /// Seconds a customer's actor may stay idle before it is passivated to the store.
    #[arg(long, env = "BOXSUB_IDLE_SECS", default_value_t = 300)]
    pub idle_secs: u64,
    /// Seconds an idempotency record is kept: a repeat within it replays the first answer,
    /// after it the key is free again. The contract promises at least a day (86400); expired
    /// records are removed in the background.
    #[arg(long = "idempotency-ttl", env = "BOXSUB_IDEMPOTENCY_TTL", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idempotency_ttl_secs: u64,
    /// Seconds a webstore's events are kept for its feed (`GET /v1/events`) and its
    /// webhooks; older ones are removed in the background. Default: 30 days.
    #[arg(long = "events-retention-secs", env = "BOXSUB_EVENTS_RETENTION_SECS",
          default_value = "2592000", value_parser = parse_long_seconds)]
    pub events_retention: Duration,
    /// Seconds before a failed webhook delivery is first retried; each later retry waits four
    /// times longer (at most six hours), with 20% jitter either way.
    #[arg(long = "webhook-first-retry-secs", env = "BOXSUB_WEBHOOK_FIRST_RETRY_SECS",
          default_value = "5", value_parser = parse_seconds)]
    pub webhook_first_retry: Duration,
    /// Seconds a webhook endpoint may keep failing one event before it is disabled.
    /// Default: 3 days.
    #[arg(long = "webhook-give-up-secs", env = "BOXSUB_WEBHOOK_GIVE_UP_SECS",
          default_value = "259200", value_parser = parse_long_seconds)]
    pub webhook_give_up: Duration,
    /// Memory for the store's page cache, in MiB.
    #[arg(long, env = "BOXSUB_CACHE_MB", default_value_t = 64)]
    pub cache_mb: u64,
    /// Read and decode every stored record before serving, and refuse to start if any is
    /// unreadable. Without it the same check runs in the background after start-up (so that
    /// a large store is ready at once) and logs every unreadable record.
    #[arg(long, env = "BOXSUB_VERIFY_STORE", value_parser = clap::builder::BoolishValueParser::new())]
    pub verify_store: bool,
    /// Seconds to let in-flight requests finish after SIGTERM or Ctrl-C.
    #[arg(long, env = "BOXSUB_SHUTDOWN_GRACE_SECS", default_value_t = 5)]
    pub shutdown_grace_secs: u64,
    /// Connections open at once; past this, new ones get a 503 and are closed at once.
    /// Default: 4096, or fewer when the open-files limit leaves less room.
    #[arg(long, env = "BOXSUB_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Seconds a request head may take, from its first byte (from the accept for a
    /// connection's first request); the connection is closed past it.
    #[arg(long = "header-timeout-secs", env = "BOXSUB_HEADER_TIMEOUT_SECS", default_value = "10",
          value_parser = parse_seconds)]
    pub header_timeout: Duration,
    /// Seconds a request body may take to arrive; past it, 408 and the connection is closed.
    #[arg(long = "body-timeout-secs", env = "BOXSUB_BODY_TIMEOUT_SECS", default_value = "20",
          value_parser = parse_seconds)]
    pub body_timeout: Duration,
    /// Seconds a keep-alive connection may stay idle between requests (or take to read its
    /// answer) before it is closed.
    #[arg(long = "idle-timeout-secs", env = "BOXSUB_IDLE_TIMEOUT_SECS", default_value = "30",
          value_parser = parse_seconds)]
    pub idle_timeout: Duration,
    /// Where SIGUSR1 writes an online backup (an export of the live store, restored with
    /// `boxsub import`); default: `backups` in the data directory.
    #[arg(long, env = "BOXSUB_BACKUP_DIR")]
    pub backup_dir: Option<PathBuf>,
    /// This host's id range, 0 to 8191: the customer and order ids it gives out are
    /// k·2^40 + 1 up to (k+1)·2^40, so that ids of different hosts never collide and a
    /// webstore can move between hosts (export/import) keeping its ids. Keep it for the life
    /// of a data directory; give each host its own.
    #[arg(long, env = "BOXSUB_ID_RANGE", default_value_t = 0,
          value_parser = clap::value_parser!(u16).range(0..=8191))]
    pub id_range: u16,
    /// Where Prometheus metrics are served: `main` (at /metrics on --addr), `off`, or an
    /// address of their own such as 127.0.0.1:9187.
    #[arg(long, env = "BOXSUB_METRICS", default_value = "main", value_parser = parse_metrics_at)]
    pub metrics: MetricsAt,
    /// Free space, in MiB, the data directory's filesystem must keep; below it writes are
    /// refused with 503 and reads go on. Overrides --min-free-percent.
    #[arg(long, env = "BOXSUB_MIN_FREE_MB")]
    pub min_free_mb: Option<u64>,
    /// Free space the data directory's filesystem must keep, as a percentage of its size,
    /// at least 8 MiB and at most 1 GiB.
    #[arg(long, env = "BOXSUB_MIN_FREE_PERCENT", default_value_t = 5.0,
          value_parser = parse_percent)]
    pub min_free_percent: f64,
    /// Seconds a whole request may take once its head is read; past it, 503.
    #[arg(long = "request-timeout-secs", env = "BOXSUB_REQUEST_TIMEOUT_SECS", default_value = "30",
          value_parser = parse_seconds)]
    pub request_timeout: Duration,
    /// Serve only these webstores of the catalogue (comma-separated ids): a shard of a
    /// deployment sharded by webstore. Requests for any other get 421. Without it, every
    /// webstore. A webstore this node's store has released to another shard is never
    /// served again, whatever this says.
    #[arg(long, env = "BOXSUB_WEBSTORES", value_delimiter = ',')]
    pub webstores: Option<Vec<String>>,
    /// The address producers open the web app at (`https://shop.example`), when boxsub is
    /// behind a proxy: with `https://` the app's cookies are `Secure`, and its forms must
    /// come from this origin. Without it, cookies are not `Secure` (boxsub itself speaks
    /// plain HTTP) and forms must come from the host they were posted to.
    #[arg(long, env = "BOXSUB_PUBLIC_URL", value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// The proxies in front of boxsub (comma-separated IP addresses, such as the HAProxy of
    /// a sharded deployment): a connection from one of them is counted, for the limits on
    /// the app's sign-ins per client, as the address it appended to `X-Forwarded-For`.
    /// Without it, every connection is its peer's (behind a proxy, all of them the proxy's).
    #[arg(long, env = "BOXSUB_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// The admin listener's address (moving webstores between shards); it runs only with
    /// --admin-token-file. Keep it on loopback or a private network: never the public port.
    #[arg(long, env = "BOXSUB_ADMIN_ADDR", default_value = "127.0.0.1:3001")]
    pub admin_addr: String,
    /// A file holding the admin listener's bearer token (at least 16 characters; its
    /// SHA-256 is kept, the token never logged). Without it, no admin listener.
    #[arg(long, env = "BOXSUB_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Seconds a move's copy session may go unused (no round of changes read, no export of
    /// its webstore) before it ends on its own, its command gone: above the longest step of
    /// `boxsub move-webstore` (an import, at most 600 s).
    #[arg(long = "copy-session-idle-secs", env = "BOXSUB_COPY_SESSION_IDLE_SECS",
          default_value = "900", value_parser = parse_seconds)]
    pub copy_session_idle: Duration,
    /// Join a replicated group: the NATS servers of its changelog (`nats://H:P`, several
    /// comma-separated). Without it, boxsub runs alone on its write-ahead log.
    #[arg(long, env = "BOXSUB_CHANGELOG", value_delimiter = ',', value_parser = parse_nats_url)]
    pub changelog: Vec<String>,
    /// The group's changelog stream: nodes started with the same one form a group.
    #[arg(long, env = "BOXSUB_CHANGELOG_STREAM", default_value = "boxsub",
          value_parser = parse_stream_name)]
    pub changelog_stream: String,
    /// This node's name in its group (unique in the group; required with --changelog).
    #[arg(long, env = "BOXSUB_NODE_NAME", value_parser = parse_node_name)]
    pub node_name: Option<String>,
    /// Replicas of the changelog's streams on the NATS servers (3: a quorum of 2 survives the
    /// loss of one server); used when the group's streams are created.
    #[arg(long, env = "BOXSUB_CHANGELOG_REPLICAS", default_value_t = 3,
          value_parser = clap::value_parser!(u16).range(1..=5))]
    pub changelog_replicas: u16,
    /// How many changelog messages a standby lets pass between replica snapshots (the
    /// changelog is trimmed behind the one before the latest).
    #[arg(long, env = "BOXSUB_CHANGELOG_SNAPSHOT_EVERY", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub changelog_snapshot_every: u64,
    /// The NATS user this node connects to its group's servers as: a credentials file
    /// (`.creds`, a user JWT and seed) or a file holding the user's nkey seed (`SU…`).
    /// Read at start; never logged.
    #[arg(long, env = "BOXSUB_CHANGELOG_CREDS")]
    pub changelog_creds: Option<PathBuf>,
    /// A CA certificate (PEM) to check the NATS servers' TLS certificates against: with it,
    /// the node speaks to its servers over TLS only.
    #[arg(long, env = "BOXSUB_CHANGELOG_TLS_CA")]
    pub changelog_tls_ca: Option<PathBuf>,
}

/// A NATS server URL.
fn parse_nats_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    let rest = text
        .strip_prefix("nats://")
        .or_else(|| text.strip_prefix("tls://"))
        .ok_or_else(|| format!("{text:?} is not a NATS URL: give nats://HOST:PORT"))?;
    if rest.is_empty() || rest.contains('/') {
        return Err(format!("{text:?} is not a NATS URL: give nats://HOST:PORT"));
    }
    Ok(text.to_owned())
}

/// A JetStream stream name: letters, digits, `-` and `_`.
fn parse_stream_name(text: &str) -> Result<String, String> {
    name_of(text, 32, "a stream name", |c| {
        c.is_ascii_alphanumeric() || c == '-' || c == '_'
    })
}

/// A node name: letters, digits, `-`, `_` and `.`.
fn parse_node_name(text: &str) -> Result<String, String> {
    name_of(text, 64, "a node name", |c| {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
    })
}

fn name_of(
    text: &str,
    max: usize,
    what: &str,
    allowed: fn(char) -> bool,
) -> Result<String, String> {
    if text.is_empty() || text.len() > max || !text.chars().all(allowed) {
        return Err(format!(
            "{text:?} is not {what}: give 1 to {max} letters, digits, '-' or '_'"
        ));
    }
    Ok(text.to_owned())
}

/// The values of `--durability`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityFlag {
    /// Acknowledge writes once they are on disk.
    On,
    /// Acknowledge writes at once, and sync them in the background.
    Off,
}

impl ServeConfig {
    /// The id range of `--id-range` (checked by the parser).
    pub fn id_range(&self) -> IdRange {
        IdRange::new(self.id_range).unwrap_or_default()
    }

    /// The free-space reserve of the data directory's filesystem.
    pub fn reserve(&self) -> Reserve {
        match self.min_free_mb {
            Some(mb) => Reserve::Bytes(mb.saturating_mul(1 << 20)),
            None => Reserve::Percent(self.min_free_percent),
        }
    }

    /// The group this node joins (`--changelog`), if any; an error names what is missing.
    pub fn group(&self) -> Result<Option<crate::replication::GroupSettings>, String> {
        if self.changelog.is_empty() {
            return Ok(None);
        }
        let node = self
            .node_name
            .clone()
            .ok_or("--changelog needs --node-name (BOXSUB_NODE_NAME): each node of a group has a name of its own")?;
        if self.durability == DurabilityFlag::Off {
            return Err("--changelog acknowledges writes once the group holds them: it cannot run with --durability off".into());
        }
        if let Some(creds) = &self.changelog_creds {
            crate::replication::changelog::read_credentials(creds)
                .map_err(|error| format!("--changelog-creds: {error}"))?;
        }
        if let Some(ca) = &self.changelog_tls_ca {
            let pem = std::fs::read_to_string(ca).map_err(|error| {
                format!("--changelog-tls-ca: reading {}: {error}", ca.display())
            })?;
            if !pem.contains("-----BEGIN CERTIFICATE-----") {
                return Err(format!(
                    "--changelog-tls-ca: {} holds no PEM certificate",
                    ca.display()
                ));
            }
        }
        Ok(Some(crate::replication::GroupSettings {
            servers: self.changelog.clone(),
            stream: self.changelog_stream.clone(),
            node,
            replicas: usize::from(self.changelog_replicas),
            snapshot_every: self.changelog_snapshot_every,
            credentials: self.changelog_creds.clone(),
            tls_ca: self.changelog_tls_ca.clone(),
        }))
    }

    /// The actor call deadline.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms.max(1))
    }
}

/// A percentage from 0 to 100.
fn parse_percent(text: &str) -> Result<f64, String> {
    let percent: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{text:?} is not a percentage"))?;
    if !(0.0..=100.0).contains(&percent) {
        return Err(format!("{text} is out of range: give 0 to 100"));
    }
    Ok(percent)
}

/// A number of seconds for a span of days: more than 0, at most ten years.
fn parse_long_seconds(text: &str) -> Result<Duration, String> {
    const TEN_YEARS: f64 = 10.0 * 366.0 * 86_400.0;
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds <= TEN_YEARS) {
        return Err(format!(
            "{text} s is out of range: give more than 0 and at most {TEN_YEARS}"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A number of seconds (fractions allowed), more than zero and at most a day.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(format!(
            "{text} s is out of range: give more than 0 and at most 86400"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The commands of both binaries against docs/operations.md ("### Commands"), which lists
/// each of them: the tests here and in `tools` enumerate the command lines clap builds, so
/// that a new command fails them until the document names it.
#[cfg(test)]
pub(crate) mod documented {
    /// The "### Commands" section of docs/operations.md, up to the next heading.
    pub fn commands_section() -> &'static str {
        let document = include_str!("../docs/operations.md");
        let start = document
            .find("\n### Commands\n")
            .expect("docs/operations.md has a \"### Commands\" section");
        let section = &document[start + 1..];
        let end = section[1..]
            .find("\n#")
            .map_or(section.len(), |end| end + 1);
        &section[..end]
    }

    /// The subcommands of `command` (hidden ones included; clap's own `help` aside) that
    /// `section` does not name as `` `BINARY NAME`` `` followed by a space or the code
    /// span's end, with BINARY the command's name.
    pub fn missing(command: &clap::Command, section: &str) -> Vec<String> {
        let binary = command.get_name();
        let names: Vec<&str> = command
            .get_subcommands()
            .map(clap::Command::get_name)
            .filter(|name| *name != "help")
            .collect();
        assert!(!names.is_empty(), "{binary} has no subcommands");
        names
            .into_iter()
            .filter(|name| {
                let named = format!("`{binary} {name}");
                !section.match_indices(&named).any(|(at, _)| {
                    matches!(section[at + named.len()..].chars().next(), Some(' ' | '`'))
                })
            })
            .map(str::to_owned)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::documented::{commands_section, missing};
    use super::Cli;

    #[test]
    fn every_boxsub_command_is_in_docs_operations_md_commands() {
        let missing = missing(&Cli::command(), commands_section());
        assert!(
            missing.is_empty(),
            "docs/operations.md \"### Commands\" does not name `boxsub` {missing:?}"
        );
    }

    #[test]
    fn a_command_is_named_only_as_itself() {
        let cli = Cli::command();
        assert_eq!(
            missing(&cli, "`boxsub export-all` and `boxsub serve`"),
            missing(&cli, "")
                .into_iter()
                .filter(|name| name != "serve")
                .collect::<Vec<_>>(),
            "`boxsub export-all` names no `export`"
        );
    }
}
