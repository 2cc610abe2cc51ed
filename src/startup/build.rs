//! What `build` opens and reads before anything is served: the catalogue file, the admin
//! token, the store in the data directory (with `--verify-store`'s check) and the service's
//! settings from `serve`'s flags. Each is a function of the configuration that returns its
//! result or a [`StartupError`]; none binds a listener or spawns a task, and the business
//! rules stay in the service and the domain.
//!
//! Must not touch: listeners, tasks, signals (`super`), the rules.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::StartupError;
use crate::clock::unix_now;
use crate::config::{DurabilityFlag, ServeConfig};
use crate::domain::catalogue::Catalogue;
use crate::service::ServiceSettings;
use crate::store::{Durability, Store, StoreError, StoreOptions};

pub(super) fn load_catalogue(path: Option<&std::path::Path>) -> Result<Catalogue, StartupError> {
    let loaded_at = unix_now();
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
pub(super) fn admin_token(file: &std::path::Path) -> Result<[u8; 32], String> {
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
pub(super) fn store_options(config: &ServeConfig) -> StoreOptions {
    let durability = match config.durability {
        DurabilityFlag::On => Durability::Sync {
            commit_interval: Duration::from_micros(config.commit_interval_us),
        },
        DurabilityFlag::Off => Durability::Background {
            commit_interval: Duration::from_micros(config.commit_interval_us),
        },
    };
    StoreOptions {
        durability,
        cache_bytes: config.cache_mb.max(1) * 1024 * 1024,
        reserve: config.reserve(),
    }
}

/// The service's settings from `serve`'s flags.
pub(super) fn service_settings(config: &ServeConfig) -> ServiceSettings {
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
        admission_slots: config.admission_slots as usize,
    }
}

pub(super) fn open_store(config: &ServeConfig) -> Result<Store, StartupError> {
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
