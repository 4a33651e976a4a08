//! One reload round: read → compare → parse/validate/compile → one atomic swap
//! (`docs/design/contract.md#reload`).
//!
//! A round compares the files it read with those of the configuration in service and with those
//! of the last failed attempt, so the periodic re-read and duplicate events cost one read and do not
//! log the same error again. A forced round (startup, SIGHUP) always compiles and publishes.

use std::sync::Arc;
use std::time::Duration;

use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::{ConfigFile, RateLimitConfig};

use super::ConfigHandle;
use super::clash;
use super::history::LoadRecord;
use super::source::ConfigSource;

/// Reads of one round whose files fail to compile, while they keep changing between reads.
pub(crate) const SETTLE_READS: u32 = 3;

/// A compiled configuration or the errors, with the policy documents left out for clashing.
type Compiled = (Result<RateLimitConfig, String>, Vec<clash::Clash>);

/// The pause before reading failed files again: a writer's create-then-fill is quicker.
const SETTLE_PAUSE: Duration = Duration::from_millis(100);

/// What a reload round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// A new configuration is in service.
    Loaded {
        /// Its version.
        version: u64,
        /// How many domains it has.
        domains: usize,
    },
    /// The files are those already in service (or those that already failed): nothing to do.
    Unchanged,
    /// The files could not be read or are invalid; the previous configuration stays.
    Failed,
}

/// Reloads the configuration of one [`ConfigSource`] into one [`ConfigHandle`].
#[derive(Debug)]
pub(crate) struct ConfigReloader {
    source: ConfigSource,
    handle: Arc<ConfigHandle>,
    applied: Option<Vec<ConfigFile>>,
    // The files of the last failed attempt, or its read error: not worth reporting twice.
    failed: Option<Result<Vec<ConfigFile>, String>>,
    // Documents from the policy database, compiled after the files in every round.
    extra: Vec<ConfigFile>,
}

impl ConfigReloader {
    /// A reloader that has loaded nothing yet.
    pub(crate) fn new(source: ConfigSource, handle: Arc<ConfigHandle>) -> ConfigReloader {
        ConfigReloader {
            source,
            handle,
            applied: None,
            failed: None,
            extra: Vec::new(),
        }
    }

    /// Compiles the files in service (read when none are) with `extra` in place of the policy
    /// documents, publishing nothing; the error lists every problem.
    pub(crate) fn check_extra(&self, extra: &[ConfigFile]) -> Result<RateLimitConfig, String> {
        let mut all = self.base_files()?;
        all.extend_from_slice(extra);
        self.source.compile(&all)
    }

    /// Replaces the policy documents and publishes the files in service with them, in one swap.
    pub(crate) fn set_extra_at(
        &mut self,
        extra: Vec<ConfigFile>,
        now: Timestamp,
    ) -> Result<ReloadOutcome, String> {
        let files = self.base_files()?;
        let previous = std::mem::replace(&mut self.extra, extra);
        let outcome = self.apply_at(files, now);
        if outcome.is_err() {
            // Never half-applied: the documents in service stay with the snapshot in service.
            self.extra = previous;
        }
        outcome
    }

    fn base_files(&self) -> Result<Vec<ConfigFile>, String> {
        match &self.applied {
            Some(files) => Ok(files.clone()),
            None => self.read(),
        }
    }

    /// The source it reads.
    pub(crate) fn source(&self) -> &ConfigSource {
        &self.source
    }

    /// Runs one round (blocking: file I/O and compilation). With `force`, compiles and publishes
    /// even when the files did not change.
    ///
    /// Files that fail to compile are read once more after a pause: a read that overlapped a
    /// writer that is not atomic (one that creates or truncates a file, then fills it) sees a
    /// file empty or cut short. If the files changed meanwhile, the round goes on with what is
    /// there now, up to [`SETTLE_READS`] reads; only what stayed put is reported as an error.
    pub(crate) fn reload_at(&mut self, now: Timestamp, force: bool) -> ReloadOutcome {
        let mut reads_left = SETTLE_READS;
        loop {
            reads_left -= 1;
            let files = match self.read() {
                Ok(files) => files,
                Err(e) if !force && self.failed.as_ref() == Some(&Err(e.clone())) => {
                    return ReloadOutcome::Unchanged;
                }
                Err(e) => {
                    (self.handle).record_load(LoadRecord::of(None, now, None, Some(e.clone())));
                    return self.fail(e.clone(), Err(e), now);
                }
            };
            if !force && self.applied.as_ref() == Some(&files) {
                if self.failed.take().is_some() {
                    // The bad change was undone: what is in service matches the files again.
                    self.handle.clear_failure();
                    tracing::info!("configuration files are back to the loaded version");
                }
                return ReloadOutcome::Unchanged;
            }
            if !force && matches!(&self.failed, Some(Ok(f)) if *f == files) {
                return ReloadOutcome::Unchanged;
            }
            let compiled = self.compile(&files);
            if compiled.0.is_err() && reads_left > 0 {
                std::thread::sleep(SETTLE_PAUSE);
                if self.source.read().ok().as_ref() != Some(&files) {
                    continue;
                }
            }
            return self
                .finish(files, compiled, now)
                .unwrap_or(ReloadOutcome::Failed);
        }
    }

    /// Compiles `files` and publishes them in one swap, or records the failure and keeps the
    /// configuration in service. Rounds end here, and so does configuration pushed over xDS
    /// (which arrives as files rather than being read). The error lists every problem.
    pub(crate) fn apply_at(
        &mut self,
        files: Vec<ConfigFile>,
        now: Timestamp,
    ) -> Result<ReloadOutcome, String> {
        let compiled = self.compile(&files);
        self.finish(files, compiled, now)
    }

    /// Compiles `files` with the policy documents that do not clash with them.
    fn compile(&self, files: &[ConfigFile]) -> Compiled {
        if self.extra.is_empty() {
            return (self.source.compile(files), Vec::new());
        }
        let (kept, clashes) = if self.source.merges_domains() {
            (self.extra.clone(), Vec::new())
        } else {
            clash::split(files, &self.extra)
        };
        let mut all = files.to_vec();
        all.extend(kept);
        (self.source.compile(&all), clashes)
    }

    /// Publishes what compiled in one swap, or records the failure and keeps the configuration
    /// in service.
    fn finish(
        &mut self,
        files: Vec<ConfigFile>,
        (compiled, clashes): Compiled,
        now: Timestamp,
    ) -> Result<ReloadOutcome, String> {
        match compiled {
            Ok(config) => {
                for warning in config.warnings() {
                    tracing::warn!("rate limit configuration: {warning}");
                }
                let domains = config.domain_count();
                // The clashes first: whoever sees the new configuration sees its clashes too.
                self.handle.set_clashes(clashes);
                let all = self.with_extra(&files);
                let version = self.handle.publish(config, now);
                (self.handle).record_load(LoadRecord::of(Some(&all), now, Some(version), None));
                self.handle.clear_failure();
                self.applied = Some(files);
                self.failed = None;
                tracing::info!(version, domains, "rate limit configuration loaded");
                Ok(ReloadOutcome::Loaded { version, domains })
            }
            Err(errors) => {
                let all = self.with_extra(&files);
                let failed = LoadRecord::of(Some(&all), now, None, Some(errors.clone()));
                self.handle.record_load(failed);
                self.fail(errors.clone(), Ok(files), now);
                Err(errors)
            }
        }
    }

    /// `files` and the policy documents compiled with them: what a load's hash covers.
    fn with_extra(&self, files: &[ConfigFile]) -> Vec<ConfigFile> {
        let mut all = files.to_vec();
        all.extend_from_slice(&self.extra);
        all
    }

    /// Reads the files, retrying once: a read racing an atomic replace can see a file vanish
    /// between listing and reading.
    fn read(&self) -> Result<Vec<ConfigFile>, String> {
        self.source.read().or_else(|first| {
            std::thread::sleep(Duration::from_millis(100));
            self.source.read().map_err(|_| first.to_string())
        })
    }

    fn fail(
        &mut self,
        errors: String,
        attempt: Result<Vec<ConfigFile>, String>,
        now: Timestamp,
    ) -> ReloadOutcome {
        // Go's message, with the errors on one line: a text log escapes a newline, which
        // would leave a literal `\n` between them.
        tracing::error!(
            "Error loading new configuration: {}",
            super::one_line(&errors)
        );
        self.handle.record_failure(errors, now);
        self.failed = Some(attempt);
        ReloadOutcome::Failed
    }
}
