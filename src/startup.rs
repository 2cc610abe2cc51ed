//! Building and running the application: load the catalogue, bind the listener (port 0
//! allowed), create the service, serve until a shutdown signal, then drain. Tests boot the
//! same [`Application`] that `main` does. Must not touch: business rules.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;

use crate::config::ServeConfig;
use crate::domain::catalogue::{Catalogue, CatalogueError, DEMO_CREDENTIALS};
use crate::service::{Service, ServiceError, ServiceSettings};

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
    /// The data directory could not be created.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The service could not be built.
    #[error("starting the service: {0}")]
    Service(#[from] ServiceError),
}

/// A bound, ready-to-run boxsub.
pub struct Application {
    listener: TcpListener,
    addr: SocketAddr,
    service: Arc<Service>,
    uses_demo_catalogue: bool,
    shutdown_grace: Duration,
}

impl Application {
    /// Loads the catalogue, prepares the data directory and binds the listener.
    pub async fn build(config: &ServeConfig) -> Result<Application, StartupError> {
        let loaded_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs() as i64);
        let catalogue = match &config.catalogue {
            Some(path) => {
                let shown = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| {
                    StartupError::CatalogueFile {
                        path: shown.clone(),
                        source,
                    }
                })?;
                Catalogue::parse(&text, loaded_at).map_err(|source| StartupError::Catalogue {
                    path: shown,
                    source,
                })?
            }
            None => Catalogue::demo(loaded_at),
        };
        std::fs::create_dir_all(&config.data_dir).map_err(|source| StartupError::DataDir {
            path: config.data_dir.display().to_string(),
            source,
        })?;
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
        let hashers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let service = Service::new(
            Arc::new(catalogue),
            ServiceSettings {
                call_timeout: config.call_timeout(),
                password_hashers: hashers,
            },
        )?;
        Ok(Application {
            listener,
            addr,
            service: Arc::new(service),
            uses_demo_catalogue: config.catalogue.is_none(),
            shutdown_grace: Duration::from_secs(config.shutdown_grace_secs),
        })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
        lines
    }

    /// Serves until `shutdown` completes, then stops accepting and lets in-flight requests
    /// finish within the grace period; idle keep-alive connections are closed.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let service = self.service.clone();
        let pruner = tokio::spawn(async move {
            let mut every_minute = tokio::time::interval(Duration::from_secs(60));
            loop {
                every_minute.tick().await;
                service.prune_throttles();
            }
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = warp::serve(crate::http::routes(self.service.clone()))
            .incoming(self.listener)
            .graceful(async move {
                let _ = stop_rx.await;
            })
            .run();
        let mut server = std::pin::pin!(server);
        tokio::select! {
            () = &mut server => {}
            () = shutdown => {
                tracing::info!("shutting down: no new connections, finishing requests in flight");
                let _ = stop_tx.send(());
                if tokio::time::timeout(self.shutdown_grace, &mut server).await.is_err() {
                    tracing::warn!("requests still in flight after the grace period; stopping anyway");
                }
            }
        }
        pruner.abort();
    }
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
