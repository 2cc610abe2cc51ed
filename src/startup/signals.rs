//! The process's signals and what each one starts: SIGHUP re-reads the catalogue file,
//! SIGUSR1 writes an online backup (see [`super::backup`]), SIGTERM and SIGINT end serving.
//! Each handler is installed before anything waits on it (SIGHUP and SIGUSR1 in
//! `Application::build`, SIGTERM and SIGINT when [`shutdown_signal`] is called), so a signal
//! that arrives early waits instead of taking its default action (ending the process). On a
//! group's standby, reloads and backups are left to the node that serves. Must not touch: what a reload accepts (the
//! service decides) or how a backup is written.

use std::future::Future;
use std::sync::Arc;

use tokio::signal::unix::Signal;

use super::backup::{committed, export_backup};
use crate::clock::unix_now;
use crate::node::Node;

/// On each SIGHUP, re-reads the catalogue file and puts it in force for new requests; a
/// catalogue that is broken, or drops a webstore that has customers, is refused with a
/// logged error and the one in force keeps serving.
pub(super) fn spawn_reloads(
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
pub(super) fn spawn_backups(
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
