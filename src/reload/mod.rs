//! The live configuration: a handle every request reads one snapshot from, and the loader that
//! builds a new snapshot and publishes it with one atomic swap.
//!
//! Parse → validate → compile happen entirely before the swap, so a bad file never replaces a good
//! configuration, and a request in flight keeps the snapshot it started with.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwapOption;

use crate::clock::Timestamp;
use crate::config::RateLimitConfig;

/// One loaded configuration and when it was loaded.
#[derive(Debug)]
pub struct Snapshot {
    /// The compiled configuration.
    pub config: RateLimitConfig,
    /// Increases by one with every successful load (1 for the first).
    pub version: u64,
    /// When it was loaded.
    pub loaded_at: Timestamp,
}

/// The latest load attempt that failed, kept for `/rlconfig`.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    /// Every error of that attempt, one per line.
    pub errors: String,
    /// When it happened.
    pub at: Timestamp,
}

/// Shared, lock-free access to the current configuration.
#[derive(Debug, Default)]
pub struct ConfigHandle {
    current: ArcSwapOption<Snapshot>,
    last_failure: ArcSwapOption<LoadFailure>,
    versions: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
}

impl ConfigHandle {
    /// A handle with no configuration loaded.
    pub fn new() -> ConfigHandle {
        ConfigHandle::default()
    }

    /// The current snapshot. Take it once per request and keep the `Arc` (never hold a guard
    /// across an `.await`).
    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.current.load_full()
    }

    /// Publishes a successfully compiled configuration.
    pub fn publish(&self, config: RateLimitConfig, now: Timestamp) -> u64 {
        let version = self.versions.fetch_add(1, Ordering::SeqCst) + 1;
        self.current.store(Some(Arc::new(Snapshot {
            config,
            version,
            loaded_at: now,
        })));
        self.successes.fetch_add(1, Ordering::Relaxed);
        version
    }

    /// Records a failed load; the current snapshot stays in place.
    pub fn record_failure(&self, errors: String, now: Timestamp) {
        self.last_failure
            .store(Some(Arc::new(LoadFailure { errors, at: now })));
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The latest failed load, if any.
    pub fn last_failure(&self) -> Option<Arc<LoadFailure>> {
        self.last_failure.load_full()
    }

    /// Successful loads so far (`config_load_success`).
    pub fn load_successes(&self) -> u64 {
        self.successes.load(Ordering::Relaxed)
    }

    /// Failed loads so far (`config_load_error`).
    pub fn load_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

/// Loads the configuration the settings point at and publishes it; on failure records the errors
/// and keeps what was loaded before. Returns the number of domains when the load succeeded.
pub fn load_from_settings(
    settings: &crate::settings::Settings,
    handle: &ConfigHandle,
    now: Timestamp,
) -> Option<usize> {
    use crate::config::{self, CompileOptions};
    let files = match &settings.config_path {
        Some(path) => config::loader::load_path(path, settings.runtime_ignoredotfiles),
        None => config::loader::load_runtime(
            &settings.runtime_root,
            &settings.runtime_subdirectory,
            &settings.runtime_appdirectory,
            settings.runtime_watch_root,
            settings.runtime_ignoredotfiles,
        ),
    };
    let opts = CompileOptions {
        merge_domains: settings.merge_domain_config,
    };
    let result = files
        .map_err(|e| e.to_string())
        .and_then(|files| config::compile(&files, &opts).map_err(|e| e.to_string()));
    match result {
        Ok(config) => {
            let domains = config.domain_count();
            let version = handle.publish(config, now);
            tracing::info!(version, domains, "rate limit configuration loaded");
            Some(domains)
        }
        Err(errors) => {
            tracing::error!("Error loading new configuration:\n{errors}");
            handle.record_failure(errors, now);
            None
        }
    }
}
