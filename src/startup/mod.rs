//! Building and running the application: load the catalogue, open the store, bind the
//! listener (port 0 allowed), create the service, serve until a shutdown signal, then drain
//! and flush. Tests boot the same [`Application`] that `main` does. Must not touch: business
//! rules.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::actors::customer::unix_now;
use crate::app::{AppSettings, PublicOrigin};
use crate::config::MetricsAt;
use crate::config::{DurabilityFlag, ServeConfig};
use crate::domain::catalogue::{Catalogue, CatalogueError, DEMO_CREDENTIALS, DEMO_PRODUCERS};
use crate::http::server::ConnectionLimits;
use crate::http::watch::PhaseDeadlines;
use crate::http::{RequestLimits, RouteSettings};
use crate::node::Node;
use crate::replication::{GroupSettings, Primary, StartPrimary};
use crate::service::placement::Served;
use crate::service::{EventViewsHandle, Service, ServiceError, ServiceSettings};
use crate::store::{Durability, Store, StoreError, StoreOptions};
use crate::webhooks::{WebhookSettings, Webhooks};

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// The catalogue file could not be read.
    #[error("reading catalogue {path}: {source}")]
    CatalogueFile {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The catalogue broke a rule.
    #[error("{path}: {source}")]
    Catalogue {
        /// The file.
        path: String,
        /// What and where.
        source: CatalogueError,
    },
    /// The store in the data directory could not be opened.
    #[error("data directory {path}: {source}")]
    Store {
        /// The directory.
        path: String,
        /// What is wrong.
        source: StoreError,
    },
    /// The listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The flags contradict each other or miss one.
    #[error("{0}")]
    Config(String),
    /// The service could not be built.
    #[error("starting the service: {0}")]
    Service(#[from] ServiceError),
}

/// A bound, ready-to-run boxsub.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    /// The listener of `--metrics ADDR`, when metrics have an address of their own.
    metrics_listener: Option<TcpListener>,
    /// The admin listener and the SHA-256 of its token, with `--admin-token-file`.
    admin: Option<(TcpListener, [u8; 32])>,
    /// What the HTTP layer serves: the service, or none while a group's standby.
    node: Arc<Node>,
    /// Alone (the service runs from start to stop) or in a replicated group.
    mode: Mode,
    uses_demo_catalogue: bool,
    shutdown_grace: Duration,
    /// What the served service's background work is given.
    duties: DutySettings,
    connections: ConnectionLimits,
    requests: RequestLimits,
    metrics: MetricsAt,
    /// How the producers' web app is served.
    app: AppSettings,
    /// The catalogue file, re-read on SIGHUP (none: the demo catalogue, never reloaded).
    catalogue_file: Option<std::path::PathBuf>,
    /// Where SIGUSR1 writes online backups.
    backup_dir: std::path::PathBuf,
    /// SIGHUP and SIGUSR1, watched from `build` on: a signal that arrives while the server
    /// starts waits for it instead of ending the process (their default action).
    hangups: std::io::Result<Signal>,
    backup_requests: std::io::Result<Signal>,
}

/// How the node runs.
enum Mode {
    /// Alone, on its own write-ahead log: the service is built at start.
    Standalone(Arc<Service>),
    /// In a replicated group: the service is built whenever the node takes over.
    Group(Box<GroupLaunch>),
}

/// What a node of a group needs to run.
struct GroupLaunch {
    settings: GroupSettings,
    data_dir: PathBuf,
    options: StoreOptions,
    commit_interval: Duration,
    start_primary: StartPrimary,
}

/// Connections allowed at once by default, when the open-files limit leaves room for them.
/// Every connection may hold up to [`crate::http::server::MAX_HEAD_BYTES`] of buffered head, so this bounds that
/// memory at about 256 MiB; thousands of stalled connections fit below it while their head
/// deadline runs out.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// File descriptors kept back from connections for the store, the listener and the runtime.
const RESERVED_FILES: u64 = 64;

impl Application {
    /// Raises the open-files limit, loads the catalogue, opens the store and binds the
    /// listener.
    pub async fn build(config: &ServeConfig) -> Result<Application, StartupError> {
        let hangups = signal(SignalKind::hangup());
        let backup_requests = signal(SignalKind::user_defined1());
        let open_files = raise_open_files_limit();
        let max_connections = config
            .max_connections
            .unwrap_or_else(|| default_max_connections(open_files));
        tracing::info!(
            max_connections,
            header_timeout_secs = config.header_timeout.as_secs_f64(),
            idle_timeout_secs = config.idle_timeout.as_secs_f64(),
            body_timeout_secs = config.body_timeout.as_secs_f64(),
            request_timeout_secs = config.request_timeout.as_secs_f64(),
            "connection limits"
        );
        let catalogue = load_catalogue(config.catalogue.as_deref())?;
        if let Some(named) = &config.webstores {
            let unknown: Vec<&str> = named
                .iter()
                .filter(|id| catalogue.webstore_by_id(id).is_none())
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                return Err(StartupError::Config(format!(
                    "--webstores names webstores the catalogue does not have: {}",
                    unknown.join(", ")
                )));
            }
        }
        let group = config.group().map_err(StartupError::Config)?;
        let store = match group {
            None => Some(open_store(config)?),
            Some(_) => None,
        };
        let listener =
            TcpListener::bind(&config.addr)
                .await
                .map_err(|source| StartupError::Bind {
                    addr: config.addr.clone(),
                    source,
                })?;
        let addr = listener.local_addr().map_err(|source| StartupError::Bind {
            addr: config.addr.clone(),
            source,
        })?;
        let metrics_listener = match &config.metrics {
            MetricsAt::Address(metrics_addr) => {
                Some(TcpListener::bind(metrics_addr).await.map_err(|source| {
                    StartupError::Bind {
                        addr: metrics_addr.clone(),
                        source,
                    }
                })?)
            }
            _ => None,
        };
        let admin = match &config.admin_token_file {
            None => None,
            Some(file) => {
                let token = admin_token(file).map_err(StartupError::Config)?;
                let listener = TcpListener::bind(&config.admin_addr)
                    .await
                    .map_err(|source| StartupError::Bind {
                        addr: config.admin_addr.clone(),
                        source,
                    })?;
                Some((listener, token))
            }
        };
        let settings = service_settings(config);
        let duties = DutySettings {
            idle: Duration::from_secs(config.idle_secs.max(1)),
            census: !config.verify_store,
            events_retention: config.events_retention,
            webhooks: WebhookSettings {
                first_retry: config.webhook_first_retry,
                give_up: config.webhook_give_up,
                ..WebhookSettings::default()
            },
        };
        let (node, mode) = match (store, group) {
            (Some(store), _) => {
                let service = Arc::new(Service::new(catalogue, store, settings)?);
                (
                    Arc::new(Node::standalone(service.clone())),
                    Mode::Standalone(service),
                )
            }
            (None, Some(group)) => {
                let node = Arc::new(Node::in_group(&group.node));
                let file = config.catalogue.clone();
                let start_primary: StartPrimary = Box::new(move |store: Store| {
                    // The catalogue file as it is now (it may have changed while this node
                    // was a standby), or the one read at start if it no longer parses.
                    let catalogue = match load_catalogue(file.as_deref()) {
                        Ok(current) => current,
                        Err(error) => {
                            tracing::error!(%error, "the catalogue file is refused; serving the one read at start");
                            catalogue.clone()
                        }
                    };
                    let service = Arc::new(
                        Service::new(catalogue, store, settings.clone())
                            .map_err(|error| error.to_string())?,
                    );
                    let duties = PrimaryDuties::start(service.clone(), duties);
                    Ok(Primary {
                        service,
                        duties: Box::new(duties),
                    })
                });
                let launch = GroupLaunch {
                    settings: group,
                    data_dir: config.data_dir.clone(),
                    options: store_options(config),
                    commit_interval: Duration::from_micros(config.commit_interval_us),
                    start_primary,
                };
                (node, Mode::Group(Box::new(launch)))
            }
            (None, None) => unreachable!("a store is opened unless the node is in a group"),
        };
        Ok(Application {
            listener,
            addr,
            metrics_listener,
            admin,
            node,
            mode,
            uses_demo_catalogue: config.catalogue.is_none(),
            shutdown_grace: Duration::from_secs(config.shutdown_grace_secs),
            duties,
            connections: ConnectionLimits {
                max_connections,
                deadlines: PhaseDeadlines {
                    header_timeout: config.header_timeout,
                    idle_timeout: config.idle_timeout,
                },
            },
            requests: RequestLimits {
                body_timeout: config.body_timeout,
                request_timeout: config.request_timeout,
            },
            metrics: config.metrics.clone(),
            app: AppSettings {
                public: PublicOrigin::parse(config.public_url.as_deref())
                    .map_err(StartupError::Config)?,
            },
            catalogue_file: config.catalogue.clone(),
            backup_dir: config
                .backup_dir
                .clone()
                .unwrap_or_else(|| config.data_dir.join("backups")),
            hangups,
            backup_requests,
        })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin listener's address, when there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
            .as_ref()
            .and_then(|(listener, _)| listener.local_addr().ok())
    }

    /// Lines to print before serving: the demo credentials with a warning, when they apply.
    pub fn banner(&self) -> Vec<String> {
        if !self.uses_demo_catalogue {
            return Vec::new();
        }
        let mut lines = vec![
            "WARNING: serving the built-in demo catalogue. Its credentials are public and are \
             for trying boxsub out only; give --catalogue for real use."
                .to_owned(),
        ];
        for (webstore, key, secret) in DEMO_CREDENTIALS {
            lines.push(format!(
                "demo webstore {webstore}: API-Key: {key} API-Secret: {secret}"
            ));
        }
        for (webstore, email, password) in DEMO_PRODUCERS {
            lines.push(format!(
                "demo webstore {webstore}: producer app /app/sign_in: {email} / {password}"
            ));
        }
        lines
    }

    /// Serves until `shutdown` completes, then stops accepting, lets in-flight requests finish
    /// within the grace period (idle keep-alive connections are closed), stops the actors and
    /// makes the final flush.
    pub async fn run_until_stopped(mut self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let reloads = spawn_reloads(
            self.node.clone(),
            self.catalogue_file.clone(),
            std::mem::replace(&mut self.hangups, Err(std::io::ErrorKind::Other.into())),
        );
        let backups = spawn_backups(
            self.node.clone(),
            self.backup_dir.clone(),
            std::mem::replace(
                &mut self.backup_requests,
                Err(std::io::ErrorKind::Other.into()),
            ),
        );
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut stop: tokio::sync::watch::Receiver<bool>| async move {
            let _ = stop.wait_for(|stop| *stop).await;
        };
        // Alone, the service's duties run from start to stop; in a group, the node's life
        // (standby, primary, standby again) runs beside the server, and starts them whenever
        // it takes over.
        let (duties, group) = match self.mode {
            Mode::Standalone(service) => (
                Some((PrimaryDuties::start(service.clone(), self.duties), service)),
                None,
            ),
            Mode::Group(launch) => {
                let GroupLaunch {
                    settings,
                    data_dir,
                    options,
                    commit_interval,
                    start_primary,
                } = *launch;
                let life = tokio::spawn(crate::replication::run(
                    settings,
                    data_dir,
                    options,
                    commit_interval,
                    self.node.clone(),
                    start_primary,
                    stop_rx.clone(),
                ));
                (None, Some(life))
            }
        };
        let metrics_server = match self.metrics_listener.take() {
            Some(listener) => Some(tokio::spawn(crate::http::server::serve(
                listener,
                crate::http::metrics_routes(self.node.clone()),
                self.connections,
                stopped(stop_rx.clone()),
            ))),
            None => None,
        };
        let admin_server = self.admin.take().map(|(listener, token)| {
            tokio::spawn(crate::http::server::serve(
                listener,
                crate::http::admin::admin_routes(self.node.clone(), token),
                self.connections,
                stopped(stop_rx.clone()),
            ))
        });
        let settings = RouteSettings {
            limits: self.requests,
            metrics: self.metrics == MetricsAt::Main,
            app: Arc::new(self.app.clone()),
        };
        let server = crate::http::server::serve(
            self.listener,
            crate::http::routes(self.node.clone(), settings),
            self.connections,
            stopped(stop_rx),
        );
        let mut server = std::pin::pin!(server);
        tokio::select! {
            () = &mut server => {}
            () = shutdown => {
                tracing::info!("shutting down: no new connections, finishing requests in flight");
                let _ = stop_tx.send(true);
                if tokio::time::timeout(self.shutdown_grace, &mut server).await.is_err() {
                    tracing::warn!("requests still in flight after the grace period; stopping anyway");
                }
            }
        }
        let _ = stop_tx.send(true);
        reloads.abort();
        backups.abort();
        if let Some(metrics_server) = metrics_server {
            metrics_server.abort();
        }
        if let Some(admin_server) = admin_server {
            admin_server.abort();
        }
        if let Some((duties, service)) = duties {
            drop(duties);
            let registry = service.registry();
            registry.stop_all();
            match registry.store().close() {
                Ok(()) => tracing::info!("store flushed and closed"),
                Err(error) => tracing::error!(%error, "final flush of the store failed"),
            }
        }
        if let Some(life) = group {
            // The node's life closes its store itself once it sees the stop.
            if tokio::time::timeout(Duration::from_secs(30), life)
                .await
                .is_err()
            {
                tracing::error!("the node did not stop within 30 s");
            }
        }
    }
}

/// What the background work of a served service is given.
#[derive(Debug, Clone, Copy)]
struct DutySettings {
    /// How long a customer's actor may stay idle.
    idle: Duration,
    /// Whether to read every record after start-up (not when `--verify-store` did).
    census: bool,
    /// How long events are kept.
    events_retention: Duration,
    /// How webhooks are delivered.
    webhooks: WebhookSettings,
}

/// The background work of the service a node serves: upkeep, idempotency expiry, the
/// events' retention, webhook deliveries and the census after start-up. Stopped (aborted)
/// when dropped, as when a group's primary steps down.
struct PrimaryDuties {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _webhooks: Webhooks,
}

impl PrimaryDuties {
    fn start(service: Arc<Service>, settings: DutySettings) -> PrimaryDuties {
        let mut tasks = vec![
            spawn_housekeeping(service.clone(), settings.idle),
            spawn_idempotency_expiry(service.clone()),
            spawn_events_retention(service.clone(), settings.events_retention),
        ];
        if settings.census {
            tasks.push(spawn_census(service.clone()));
        }
        PrimaryDuties {
            tasks,
            _webhooks: Webhooks::start(service, settings.webhooks),
        }
    }
}

impl Drop for PrimaryDuties {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The open-files limits after raising the soft one.
#[derive(Debug, Clone, Copy)]
pub struct OpenFiles {
    /// The soft limit now in force.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Raises the soft open-files limit to the hard one (each connection is a file descriptor,
/// and the usual soft limit of 1,024 is far below what a server needs) and logs both.
pub fn raise_open_files_limit() -> OpenFiles {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        tracing::warn!("could not read the open-files limit; assuming 1024");
        return OpenFiles {
            soft: 1024,
            hard: 1024,
        };
    };
    if soft >= hard {
        tracing::info!(soft, hard, "open-files limit");
        return OpenFiles { soft, hard };
    }
    match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        Ok(()) => {
            tracing::info!(
                was = soft,
                now = hard,
                hard,
                "raised the soft open-files limit to the hard limit"
            );
            OpenFiles { soft: hard, hard }
        }
        Err(error) => {
            tracing::warn!(%error, soft, hard, "could not raise the soft open-files limit");
            OpenFiles { soft, hard }
        }
    }
}

/// [`DEFAULT_MAX_CONNECTIONS`], or fewer when the open-files limit leaves less room.
pub fn default_max_connections(files: OpenFiles) -> usize {
    let room = files
        .soft
        .saturating_sub(RESERVED_FILES)
        .max(files.soft / 2)
        .max(1);
    usize::try_from(room).map_or(DEFAULT_MAX_CONNECTIONS, |room| {
        room.min(DEFAULT_MAX_CONNECTIONS)
    })
}

fn load_catalogue(path: Option<&std::path::Path>) -> Result<Catalogue, StartupError> {
    let loaded_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64);
    let Some(path) = path else {
        return Ok(Catalogue::demo(loaded_at));
    };
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| StartupError::CatalogueFile {
        path: shown.clone(),
        source,
    })?;
    Catalogue::parse(&text, loaded_at).map_err(|source| StartupError::Catalogue {
        path: shown,
        source,
    })
}

/// The SHA-256 of the admin token in `file` (trimmed; at least 16 characters).
fn admin_token(file: &std::path::Path) -> Result<[u8; 32], String> {
    use sha2::Digest;
    let text = std::fs::read_to_string(file)
        .map_err(|error| format!("reading the admin token file {}: {error}", file.display()))?;
    let token = text.trim();
    if token.chars().count() < 16 {
        return Err(format!(
            "the admin token in {} is shorter than 16 characters: use `boxsub keygen`'s secret",
            file.display()
        ));
    }
    Ok(sha2::Sha256::digest(token.as_bytes()).into())
}

/// How `serve`'s store is opened.
fn store_options(config: &ServeConfig) -> StoreOptions {
    let durability = match config.durability {
        DurabilityFlag::On => Durability::Sync {
            commit_interval: Duration::from_micros(config.commit_interval_us),
        },
        DurabilityFlag::Off => Durability::Async,
    };
    StoreOptions {
        durability,
        cache_bytes: config.cache_mb.max(1) * 1024 * 1024,
        reserve: config.reserve(),
    }
}

/// The service's settings from `serve`'s flags.
fn service_settings(config: &ServeConfig) -> ServiceSettings {
    let hashers = std::thread::available_parallelism().map_or(2, |n| n.get());
    ServiceSettings {
        call_timeout: config.call_timeout(),
        password_hashers: hashers,
        // About a second and a half of argon2 work queued per core; past that, 503.
        password_queue: hashers * 32,
        max_calls_per_customer: 256,
        max_calls_in_flight: 16_384,
        id_range: config.id_range(),
        idempotency_ttl_secs: config.idempotency_ttl_secs,
        webstores: config.webstores.clone(),
        event_views: EventViewsHandle(Arc::new(crate::http::ApiViews)),
        admission_slots: config.admission_slots as usize,
    }
}

fn open_store(config: &ServeConfig) -> Result<Store, StartupError> {
    let opening = Instant::now();
    let store_error = |source| StartupError::Store {
        path: config.data_dir.display().to_string(),
        source,
    };
    let options = store_options(config);
    let durability = options.durability;
    let store = Store::open(
        &config.data_dir,
        options,
        Arc::new(|error: &StoreError| {
            // Acknowledging writes that may not be on disk is worse than stopping.
            eprintln!(
                "boxsub: FATAL: {error}; stopping rather than risk acknowledging lost writes"
            );
            std::process::exit(70);
        }),
    )
    .map_err(store_error)?;
    if config.verify_store {
        let census = store.verify().map_err(store_error)?;
        tracing::info!(
            customers = census.customers,
            orders = census.orders,
            elapsed_ms = opening.elapsed().as_millis() as u64,
            "store verified: every record readable"
        );
    }
    let high_water = store.high_water(config.id_range()).map_err(store_error)?;
    tracing::info!(
        data_dir = %config.data_dir.display(),
        ?durability,
        last_customer_id = high_water.customer_id,
        last_order_id = high_water.order_id,
        elapsed_ms = opening.elapsed().as_millis() as u64,
        "store opened"
    );
    Ok(store)
}

/// Reads every record of the store, logging what it holds and any record it cannot read.
/// Runs after start-up, so that a large store is served at once, and after the stored orders
/// are indexed, so that it does not slow down what order lookups wait for.
fn spawn_census(service: Arc<Service>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        service.registry().orders_indexed().await;
        let store = service.registry().store().clone();
        let _ = tokio::task::spawn_blocking(move || census(&store)).await;
    })
}

fn census(store: &Store) {
    let started = Instant::now();
    match store.verify() {
        Ok(census) => tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "store holds {} customers and {} orders, every record readable",
            census.customers,
            census.orders
        ),
        Err(error) => tracing::error!(
            %error,
            "the store holds an unreadable record: the customer it belongs to answers 503; \
             restart with --verify-store to refuse to serve a damaged store"
        ),
    }
}

/// On each SIGHUP, re-reads the catalogue file and puts it in force for new requests; a
/// catalogue that is broken, or drops a webstore that has customers, is refused with a
/// logged error and the one in force keeps serving.
fn spawn_reloads(
    node: Arc<Node>,
    file: Option<std::path::PathBuf>,
    hangups: std::io::Result<Signal>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut hangups) = hangups else {
            tracing::warn!("SIGHUP cannot be watched; the catalogue reloads only at a restart");
            return;
        };
        while hangups.recv().await.is_some() {
            let Some(file) = &file else {
                tracing::warn!("SIGHUP: serving the built-in demo catalogue, nothing to reload");
                continue;
            };
            let Some(service) = node.running_service() else {
                tracing::info!(
                    "SIGHUP on a standby: the catalogue file is read when it takes over"
                );
                continue;
            };
            let outcome = match std::fs::read_to_string(file) {
                Ok(text) => service
                    .reload_catalogue(&text, unix_now())
                    .map_err(|error| error.to_string()),
                Err(error) => Err(format!("reading {}: {error}", file.display())),
            };
            let metrics = &crate::metrics::METRICS.catalogue_reloads;
            match outcome {
                Ok(catalogue) => {
                    metrics.with_label_values(&["applied"]).inc();
                    tracing::info!(
                        file = %file.display(),
                        webstores = catalogue.webstores().len(),
                        "catalogue reloaded: in force for new requests"
                    );
                }
                Err(problems) => {
                    metrics.with_label_values(&["refused"]).inc();
                    tracing::error!(
                        file = %file.display(),
                        %problems,
                        "catalogue reload refused; the catalogue in force keeps serving"
                    );
                }
            }
        }
    })
}

/// On each SIGUSR1, writes an online backup: an export of the live store (every write
/// acknowledged before the signal is in it, and nothing half-written), first as a `.partial`
/// file, fsynced, then renamed to `boxsub-backup-<UTC time>.jsonl` in `dir` once every write
/// the export may have read is durable (read committed: a backup never holds a write that
/// the log or the group could still lose). Restore it with `boxsub import` into an empty data
/// directory. One backup at a time.
fn spawn_backups(
    node: Arc<Node>,
    dir: std::path::PathBuf,
    signals: std::io::Result<Signal>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut signals) = signals else {
            tracing::warn!("SIGUSR1 cannot be watched; online backups are not available");
            return;
        };
        while signals.recv().await.is_some() {
            let Some(service) = node.service() else {
                tracing::warn!("SIGUSR1 on a standby: backups are written by the group's primary");
                continue;
            };
            let store = service.registry().store().clone();
            drop(service);
            let dir = dir.clone();
            let started = std::time::Instant::now();
            let written = {
                let store = store.clone();
                tokio::task::spawn_blocking(move || export_backup(&store, &dir)).await
            };
            let finished = match written {
                Ok(Ok(partial)) => match committed(&store).await {
                    Ok(()) => tokio::task::spawn_blocking(move || partial.finish()).await,
                    // Dropped, the partial file is removed.
                    Err(error) => Ok(Err(error)),
                },
                Ok(Err(error)) => Ok(Err(error)),
                Err(error) => Err(error),
            };
            match finished {
                Ok(Ok((path, exported))) => tracing::info!(
                    file = %path.display(),
                    customers = exported.customers,
                    orders = exported.orders,
                    idempotency_records = exported.idempotency_records,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "backup written"
                ),
                Ok(Err(error)) => tracing::error!(%error, "backup failed"),
                Err(error) => tracing::error!(%error, "backup failed"),
            }
        }
    })
}

/// Completes once everything an export of `store` may have read is durable.
async fn committed(store: &Store) -> Result<(), String> {
    let barrier = store
        .barrier_after_visible_writes()
        .map_err(|error| error.to_string())?;
    barrier
        .durable()
        .await
        .map_err(|error| format!("the writes it holds could not be confirmed durable: {error}"))
}

/// An online backup written and fsynced under its `.partial` name, not yet counted: removed
/// when dropped (a failed wait, or the backup task ended at shutdown) unless finished.
struct PartialBackup {
    partial: std::path::PathBuf,
    path: std::path::PathBuf,
    dir: std::path::PathBuf,
    exported: crate::transfer::export::Exported,
}

impl PartialBackup {
    /// Renames it to its final name: the backup counts.
    fn finish(self) -> Result<(std::path::PathBuf, crate::transfer::export::Exported), String> {
        std::fs::rename(&self.partial, &self.path).map_err(|error| error.to_string())?;
        if let Ok(handle) = std::fs::File::open(&self.dir) {
            let _ = handle.sync_all();
        }
        Ok((self.path.clone(), self.exported))
    }
}

impl Drop for PartialBackup {
    fn drop(&mut self) {
        // Gone already once renamed.
        let _ = std::fs::remove_file(&self.partial);
    }
}

fn export_backup(store: &Store, dir: &std::path::Path) -> Result<PartialBackup, String> {
    std::fs::create_dir_all(dir).map_err(|error| format!("creating {}: {error}", dir.display()))?;
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%S%.3fZ")
        .to_string();
    let path = dir.join(format!("boxsub-backup-{stamp}.jsonl"));
    let partial = path.with_extension("jsonl.partial");
    let file = std::fs::File::create(&partial)
        .map_err(|error| format!("creating {}: {error}", partial.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut progress = crate::transfer::Progress::logged();
    let exported = crate::transfer::export::export(store, None, &mut out, &mut progress)
        .map_err(|error| error.to_string());
    let written = exported.and_then(|exported| {
        let file = out.into_inner().map_err(|error| error.to_string())?;
        file.sync_all().map_err(|error| error.to_string())?;
        Ok(exported)
    });
    match written {
        Ok(exported) => Ok(PartialBackup {
            partial,
            path,
            dir: dir.to_owned(),
            exported,
        }),
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(format!("{}: {error}", path.display()))
        }
    }
}

/// Periodic upkeep: expire sign-in throttles, passivate idle customers.
fn spawn_housekeeping(service: Arc<Service>, idle: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let period = (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
        let mut ticks = tokio::time::interval(period);
        let mut last_prune = Instant::now();
        loop {
            ticks.tick().await;
            let stopped = service.registry().passivate_idle(idle);
            if stopped > 0 {
                tracing::debug!(
                    stopped,
                    live = service.registry().active_count(),
                    "passivated idle customers"
                );
            }
            if last_prune.elapsed() >= Duration::from_secs(60) {
                service.prune_throttles();
                last_prune = Instant::now();
            }
        }
    })
}

/// Removes expired idempotency records: every quarter of their time to live (at least every
/// second, at most every five minutes) a pass goes through them in batches of 1,024, resting
/// a few milliseconds between batches so that the sweep never crowds out requests. The rest
/// caps how fast a pass removes records: with batches of 256 that was about 33,000 a
/// second, below what keyed creates reach once they stopped waiting for sled's flush, so
/// under a flood of keyed creates with a short time to live the records held kept growing.
fn spawn_idempotency_expiry(service: Arc<Service>) -> tokio::task::JoinHandle<()> {
    const BATCH: usize = 1024;
    tokio::spawn(async move {
        let ttl = service.idempotency_ttl_secs();
        let period =
            Duration::from_secs(ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(300));
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            let mut cursor: Option<Vec<u8>> = None;
            let mut removed = 0;
            let mut kept = 0;
            loop {
                let store = service.registry().store().clone();
                let from = cursor.take();
                let now = unix_now();
                let step = tokio::task::spawn_blocking(move || {
                    store.sweep_idempotency(from.as_deref(), BATCH, ttl, now)
                })
                .await;
                match step {
                    Ok(Ok(step)) => {
                        removed += step.removed;
                        kept += step.examined - step.removed;
                        crate::metrics::METRICS
                            .idempotency_expired
                            .inc_by(step.removed as u64);
                        match step.next {
                            Some(next) => cursor = Some(next),
                            None => {
                                crate::metrics::METRICS
                                    .idempotency_records
                                    .set(i64::try_from(kept).unwrap_or(i64::MAX));
                                break;
                            }
                        }
                    }
                    // A full disk or a failing store: try again next period.
                    Ok(Err(error)) => {
                        tracing::debug!(%error, "idempotency expiry paused");
                        break;
                    }
                    Err(_) => break,
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if removed > 0 {
                tracing::debug!(removed, "expired idempotency records removed");
            }
        }
    })
}

/// Removes the events older than `retention` of every webstore served here: every quarter
/// of the retention (at least every second, at most every five minutes), in batches of
/// 1,024 with a rest between them, as the idempotency expiry does.
fn spawn_events_retention(
    service: Arc<Service>,
    retention: Duration,
) -> tokio::task::JoinHandle<()> {
    const BATCH: usize = 1024;
    tokio::spawn(async move {
        let period = (retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(300));
        let mut ticks = tokio::time::interval(period);
        loop {
            ticks.tick().await;
            let before_ms = jiff::Timestamp::now().as_millisecond()
                - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
            let served: Vec<String> = service
                .catalogue()
                .webstores()
                .iter()
                .map(|webstore| webstore.settings.id.clone())
                .filter(|id| service.placement().served(id) == Served::Here)
                .collect();
            for webstore in served {
                loop {
                    let store = service.registry().store().clone();
                    let id = webstore.clone();
                    let step = tokio::task::spawn_blocking(move || {
                        store.prune_events(&id, before_ms, BATCH)
                    })
                    .await;
                    match step {
                        Ok(Ok(removed)) => {
                            crate::metrics::METRICS.events_pruned.inc_by(removed as u64);
                            if removed < BATCH {
                                break;
                            }
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%error, "events retention paused");
                            break;
                        }
                        Err(_) => break,
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    })
}

/// Completes on SIGTERM or Ctrl-C (SIGINT). The handlers are installed when this is called,
/// not when the future is first polled, so a signal that arrives as soon as the server says
/// it is listening is not lost (nor fatal: the default action of SIGTERM ends the process).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let wait = |installed: std::io::Result<tokio::signal::unix::Signal>| async move {
            match installed {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(terminate) => {}
            () = wait(interrupt) => {}
        }
    }
}
