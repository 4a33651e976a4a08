//! The live configuration: a handle every request reads one snapshot from, and the loader that
//! builds a new snapshot and publishes it with one atomic swap.
//!
//! Parse → validate → compile happen entirely before the swap, so a bad file never replaces a good
//! configuration, and a request in flight keeps the snapshot it started with. Cache keys do not
//! depend on the version, so a reload never resets counters.
//!
//! [`source`] says what to read and watch, [`watch`] and [`task`] notice changes (debounced, with a
//! periodic re-read as a safety net), [`reloader`] runs one round, [`Reloading`] serialises rounds.
//! Configuration pushed over xDS ([`crate::xds`]) enters the same pipeline through
//! [`Reloading::apply`]; rules from the policy database join every round as extra documents
//! ([`Reloading::set_extra`]).

pub(crate) mod clash;
pub(crate) mod history;
pub(crate) mod reloader;
pub(crate) mod source;
pub(crate) mod task;
pub(crate) mod watch;
mod wiring;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;

use crate::health::Health;
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::config::{ConfigFile, RateLimitConfig};

pub(crate) use clash::Clash;
pub(crate) use history::LoadRecord;
pub(crate) use reloader::ConfigReloader;
pub use reloader::ReloadOutcome;
pub(crate) use source::{ConfigSource, ConfigType, Location, Restriction};
pub use task::{WatchOptions, watch_loop};
pub use watch::WatchTarget;
pub(crate) use wiring::{refuse_empty, start, watch_files};

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

/// `errors` (one per line, as in [`LoadFailure::errors`]) on one line, joined by `"; "`: how a
/// log line carries them, since a text log shows a newline as a literal `\n`.
pub(crate) fn one_line(errors: &str) -> String {
    let lines: Vec<&str> = errors
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// Shared, lock-free access to the current configuration.
#[derive(Debug, Default)]
pub struct ConfigHandle {
    current: ArcSwapOption<Snapshot>,
    last_failure: ArcSwapOption<LoadFailure>,
    // Policy-database domains the configuration in service left out (a file defines them).
    clashes: ArcSwapOption<Vec<Clash>>,
    // The last loads, for `/rlconfig`'s hash and the load history.
    loads: history::LoadHistory,
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

    /// Forgets the failure: the files on disk load again (or match what is in service).
    pub fn clear_failure(&self) {
        self.last_failure.store(None);
    }

    /// The latest failed load since the files last loaded (or matched what is in service).
    pub fn last_failure(&self) -> Option<Arc<LoadFailure>> {
        self.last_failure.load_full()
    }

    /// Records the clashes of the configuration about to be published (recorded first, so that
    /// whoever sees that configuration sees its clashes), logging each new one at WARN.
    pub fn set_clashes(&self, clashes: Vec<Clash>) {
        let before = self.clashes();
        for c in clashes.iter().filter(|c| !before.contains(c)) {
            tracing::warn!(
                domain = %c.domain,
                file = %c.file,
                policy_rules = %c.rules,
                "domain defined by both a configuration file and policy database rules: the file \
                 wins, the rules of this domain are not enforced"
            );
        }
        for c in before.iter().filter(|c| !clashes.contains(c)) {
            tracing::info!(domain = %c.domain, "policy database rules no longer clash with a file");
        }
        self.clashes
            .store((!clashes.is_empty()).then(|| Arc::new(clashes)));
    }

    /// The policy-database domains left out of the configuration in service because a file (or
    /// an xDS push) defines them too.
    pub fn clashes(&self) -> Vec<Clash> {
        self.clashes
            .load_full()
            .map(|c| (*c).clone())
            .unwrap_or_default()
    }

    /// Records a load attempt in the load history.
    pub fn record_load(&self, r: LoadRecord) {
        self.loads.push(r);
    }

    /// The last loads (at most [`history::MAX_LOADS`]), newest first.
    pub fn loads(&self) -> Vec<LoadRecord> {
        self.loads.newest_first()
    }

    /// The `sha256:` hash of the configuration in service, if its load is still kept.
    pub fn current_hash(&self) -> Option<String> {
        self.snapshot().and_then(|s| self.loads.hash_of(s.version))
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

/// Runs reload rounds for the service: one at a time (rounds from the watcher, SIGHUP and the
/// startup load share one [`ConfigReloader`]), off the async workers, and keeps the health
/// component of `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED` in step.
#[derive(Debug, Clone)]
pub(crate) struct Reloading {
    reloader: Arc<Mutex<ConfigReloader>>,
    handle: Arc<ConfigHandle>,
    health: Arc<Health>,
    clock: Arc<dyn Clock>,
}

impl Reloading {
    /// Reloads `handle` from `source`.
    pub(crate) fn new(
        source: ConfigSource,
        handle: Arc<ConfigHandle>,
        health: Arc<Health>,
        clock: Arc<dyn Clock>,
    ) -> Reloading {
        Reloading {
            reloader: Arc::new(Mutex::new(ConfigReloader::new(source, handle.clone()))),
            handle,
            health,
            clock,
        }
    }

    /// The service's health, which reload rounds and the policy database report to.
    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// The configuration it loads into (its load history too).
    pub(crate) fn handle(&self) -> &Arc<ConfigHandle> {
        &self.handle
    }

    /// What to watch for changes.
    pub(crate) fn watch_targets(&self) -> Vec<WatchTarget> {
        self.reloader.lock().source().watch_targets()
    }

    /// One round; `force` compiles and publishes even unchanged files (startup, SIGHUP).
    pub(crate) async fn reload(&self, force: bool) -> ReloadOutcome {
        let reloader = self.reloader.clone();
        let clock = self.clock.clone();
        let round =
            tokio::task::spawn_blocking(move || reloader.lock().reload_at(clock.now(), force));
        let outcome = round.await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "configuration reload crashed; keeping the old one");
            ReloadOutcome::Failed
        });
        if let ReloadOutcome::Loaded { domains, .. } = outcome {
            self.health.set_domains_loaded(domains).await;
        }
        outcome
    }

    /// Compiles and publishes configuration that arrived as files from elsewhere (an xDS push):
    /// the same pipeline, counters and health as a file round. `Err` carries every problem found;
    /// the configuration in service then stays.
    pub(crate) async fn apply(&self, files: Vec<ConfigFile>) -> Result<ReloadOutcome, String> {
        self.publish(move |r, now| r.apply_at(files, now)).await
    }

    /// Checks that the files in service compile with `extra` as the policy database's documents
    /// (rules), publishing nothing; `Ok` is what would be in service. `Err` carries every problem.
    pub(crate) async fn check_extra(
        &self,
        extra: Vec<ConfigFile>,
    ) -> Result<RateLimitConfig, String> {
        let reloader = self.reloader.clone();
        let round = tokio::task::spawn_blocking(move || reloader.lock().check_extra(&extra));
        round
            .await
            .unwrap_or_else(|e| Err(format!("configuration check crashed: {e}")))
    }

    /// Puts `extra` in service as the policy database's documents, compiled with the files into
    /// one snapshot and swapped in at once; on `Err` nothing changes.
    pub(crate) async fn set_extra(&self, extra: Vec<ConfigFile>) -> Result<ReloadOutcome, String> {
        self.publish(move |r, now| r.set_extra_at(extra, now)).await
    }

    /// Runs one compile-and-publish `round` on the reloader off the async threads, then tells
    /// health how many domains are loaded: what every source but the file watcher shares.
    async fn publish(
        &self,
        round: impl FnOnce(&mut ConfigReloader, Timestamp) -> Result<ReloadOutcome, String>
        + Send
        + 'static,
    ) -> Result<ReloadOutcome, String> {
        let reloader = self.reloader.clone();
        let clock = self.clock.clone();
        let outcome = tokio::task::spawn_blocking(move || round(&mut reloader.lock(), clock.now()))
            .await
            .unwrap_or_else(|e| Err(format!("configuration load crashed: {e}")))?;
        if let ReloadOutcome::Loaded { domains, .. } = outcome {
            self.health.set_domains_loaded(domains).await;
        }
        Ok(outcome)
    }
}

/// A configuration file named `name` holding `contents`, for the tests.
#[cfg(test)]
pub(crate) fn test_file(name: &str, contents: &str) -> ConfigFile {
    ConfigFile {
        name: name.into(),
        contents: contents.into(),
    }
}
