//! Building and running the application: load the catalogue, open the store, bind the
//! listener (port 0 allowed), create the service, serve until a shutdown signal, then drain
//! and flush. Tests boot the same [`Application`] that `main` does. This module owns the
//! wiring: [`Application::build`] and [`Application::run_until_stopped`], and the node's mode
//! (alone or in a group); its parts are beside it, one concern each:
//!
//! - `build`: the catalogue, admin token, store and service settings read from the flags;
//! - `duties`: the background work of a served service, started and stopped together;
//! - `signals`: SIGHUP reloads, SIGUSR1 backups, SIGTERM and SIGINT shutdown;
//! - `backup`: writing one online backup;
//! - `limits`: the open-files limit and the default connection cap.
//!
//! Must not touch: business rules.

mod backup;
mod build;
mod duties;
mod limits;
mod signals;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::app::{AppSettings, PublicOrigin};
use crate::config::MetricsAt;
use crate::config::ServeConfig;
use crate::domain::catalogue::{CatalogueError, DEMO_CREDENTIALS, DEMO_PRODUCERS};
use crate::http::server::ConnectionLimits;
use crate::http::watch::PhaseDeadlines;
use crate::http::{RequestLimits, RouteSettings};
use crate::node::Node;
use crate::replication::{GroupSettings, Primary, StartPrimary};
use crate::service::{Service, ServiceError};
use crate::store::{Store, StoreError, StoreOptions};
use crate::webhooks::WebhookSettings;

use build::{admin_token, load_catalogue, open_store, service_settings, store_options};
use duties::{DutySettings, PrimaryDuties};
pub use limits::{
    default_max_connections, raise_open_files_limit, OpenFiles, DEFAULT_MAX_CONNECTIONS,
};
pub use signals::shutdown_signal;
use signals::{spawn_backups, spawn_reloads};

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
    /// The admin listener and its settings (the SHA-256 of its token...), with
    /// `--admin-token-file`.
    admin: Option<(TcpListener, crate::http::admin::AdminSettings)>,
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
                let settings = crate::http::admin::AdminSettings {
                    token_sha256: token,
                    copy_session_idle: config.copy_session_idle,
                };
                Some((listener, settings))
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
                let lease = node.lease().clone();
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
                    let duties = PrimaryDuties::start(service.clone(), lease.clone(), duties);
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
                trusted_proxies: config.trusted_proxies.clone(),
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
                Some((
                    PrimaryDuties::start(service.clone(), self.node.lease().clone(), self.duties),
                    service,
                )),
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
        let admin_server = self.admin.take().map(|(listener, settings)| {
            tokio::spawn(crate::http::server::serve(
                listener,
                crate::http::admin::admin_routes(self.node.clone(), settings),
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
