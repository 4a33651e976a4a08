//! The policy database at run time: opened at startup (SQLite, or PostgreSQL with
//! `POLICY_DB_URL`; [`super::opening`] retries in the background while it cannot be, enforcing
//! the last good copy meanwhile), written through by the admin API — each change applied to the
//! [`Overrides`] index in place, without re-reading the others — and re-read into a new index on
//! every PostgreSQL notification and every `POLICY_REFRESH_INTERVAL`, retrying with backoff while
//! the database fails (the last index stays in service).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::PolicySettings;
use super::history::{Audit, Event, HistoryEntry, HistoryQuery, RecordError};
use super::lazy::LazyStore;
use super::model::{NewOverride, StoredOverride};
use super::override_sql::OverridePage;
use super::rules::Rule;
use super::store::{PolicyStore, StoreError};
use ratelimitd_core::clock::Clock;
use ratelimitd_core::limiter::{OverrideIndex, Overrides};

/// Why a write was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// `POLICY_MAX_OVERRIDES` active overrides exist already.
    #[error("{0} active overrides exist already (POLICY_MAX_OVERRIDES)")]
    TooMany(usize),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The policy database (open or still being opened) and the index it feeds.
#[derive(Debug)]
pub(crate) struct Policy {
    store: Arc<dyn PolicyStore>,
    pub(super) lazy: Arc<LazyStore>,
    pub(super) overrides: Arc<Overrides>,
    clock: Arc<dyn Clock>,
    max_overrides: usize,
    // Writes one at a time, so the cap check and the insert cannot interleave.
    writes: tokio::sync::Mutex<()>,
    /// Where the last good copy is written (`None`: `POLICY_SNAPSHOT_PATH=off`).
    pub(super) snapshot: Option<PathBuf>,
    /// The rules last read from the database (`None` before the first read), for the copy.
    pub(super) rules_read: Mutex<Option<Vec<Rule>>>,
    /// Set when the copy is behind the database; [`Policy::snapshot_loop`] writes it.
    pub(super) dirty: AtomicBool,
    pub(super) dirty_wake: Notify,
    /// Set while writing the copy fails (logged once).
    pub(super) snapshot_failing: AtomicBool,
}

impl Policy {
    /// The policy runtime the settings describe, not open yet ([`Policy::try_open`] opens it);
    /// `Err` says why the policy API is off (`POLICY_ENABLED=false`).
    pub(crate) fn new(
        settings: &PolicySettings,
        clock: Arc<dyn Clock>,
        overrides: Arc<Overrides>,
    ) -> Result<Policy, String> {
        if !settings.enabled {
            return Err("POLICY_ENABLED is false".into());
        }
        let lazy = Arc::new(LazyStore::new(super::opening::db_name(settings)));
        Ok(Policy {
            store: lazy.clone(),
            lazy,
            overrides,
            clock,
            max_overrides: settings.max_overrides,
            writes: tokio::sync::Mutex::new(()),
            snapshot: settings.snapshot_path(),
            rules_read: Mutex::new(None),
            dirty: AtomicBool::new(false),
            dirty_wake: Notify::new(),
            snapshot_failing: AtomicBool::new(false),
        })
    }

    /// True once the database is open (until then every call answers [`StoreError::NotOpen`]).
    pub(crate) fn is_open(&self) -> bool {
        self.lazy.is_open()
    }

    /// Which database this is (the SQLite file, or the PostgreSQL server), for logs.
    pub(crate) fn db_name(&self) -> &str {
        self.lazy.name()
    }

    /// Notes that the last good copy is behind what is in service.
    pub(super) fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        self.dirty_wake.notify_one();
    }

    /// The database (the violation log writes and reads through it).
    pub(crate) fn store(&self) -> &Arc<dyn PolicyStore> {
        &self.store
    }

    /// The overrides in service now (a dry run applies a change to a copy).
    pub(crate) fn overrides_in_service(&self) -> Arc<OverrideIndex> {
        self.overrides.load()
    }

    /// The service clock (expiry and timestamps).
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Reads every active override into a new index and swaps it in; returns how many.
    pub(crate) async fn refresh(&self) -> Result<usize, StoreError> {
        let active = self.store.active_overrides(self.clock.now()).await?;
        let n = active.len();
        self.overrides.publish(OverrideIndex::new(active));
        self.mark_dirty();
        Ok(n)
    }

    /// Stores an override created by `audit.who` (its history row's reason is the override's own)
    /// and puts it in service before returning.
    pub(crate) async fn create_override(
        &self,
        o: NewOverride,
        audit: &Audit,
    ) -> Result<StoredOverride, WriteError> {
        let _one = self.writes.lock().await;
        let now = self.clock.now();
        // One COUNT, not a read of every active override.
        let active =
            usize::try_from(self.store.count_active_overrides(now).await?).unwrap_or(usize::MAX);
        if active >= self.max_overrides {
            return Err(WriteError::TooMany(active));
        }
        let id = format!("ov_{:016x}", fastrand::u64(..));
        let stored = self.store.insert_override(&id, &o, audit, now).await?;
        // In service at once; the others are not re-read (the refresh timer does that).
        self.overrides
            .publish(self.overrides.load().with(stored.clone(), now));
        self.mark_dirty();
        Ok(stored)
    }

    /// Every stored override, expired ones included.
    pub(crate) async fn list_overrides(&self) -> Result<Vec<StoredOverride>, StoreError> {
        self.store.all_overrides().await
    }

    /// One page of stored overrides (expired ones included), newest first, with one row more
    /// than the page when another page follows.
    pub(crate) async fn overrides_page(
        &self,
        page: &OverridePage,
    ) -> Result<Vec<StoredOverride>, StoreError> {
        self.store.overrides_page(page).await
    }

    /// Deletes override `id` and takes it out of service; `false` when there is none.
    pub(crate) async fn delete_override(
        &self,
        id: &str,
        audit: &Audit,
    ) -> Result<bool, StoreError> {
        let _one = self.writes.lock().await;
        let found = (self.store)
            .delete_override(id, audit, self.clock.now())
            .await?;
        if found {
            self.overrides.publish(self.overrides.load().without(id));
            self.mark_dirty();
        }
        Ok(found)
    }

    /// Holds off other writers until dropped: a rule change checks, stores and publishes under it.
    pub(crate) async fn lock_writes(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writes.lock().await
    }

    /// Every rule, by id (remembered for the last good copy).
    pub(crate) async fn rules(&self) -> Result<Vec<Rule>, StoreError> {
        let rules = self.store.rules().await?;
        let changed = self.rules_read.lock().replace(rules.clone()).as_ref() != Some(&rules);
        if changed {
            self.mark_dirty();
        }
        Ok(rules)
    }

    /// Stores `rule` with its history row (under [`Policy::lock_writes`], after checking it
    /// compiles); returns the row.
    pub(crate) async fn put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
    ) -> Result<HistoryEntry, StoreError> {
        self.store.put_rule(rule, audit, self.clock.now()).await
    }

    /// Deletes rule `id` with its history row (under [`Policy::lock_writes`]); `false` when
    /// there is none.
    pub(crate) async fn delete_rule(&self, id: &str, audit: &Audit) -> Result<bool, StoreError> {
        self.store.delete_rule(id, audit, self.clock.now()).await
    }

    /// One page of the history, newest first, with one row more than the page when another
    /// page follows.
    pub(crate) async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>, StoreError> {
        self.store.history(q).await
    }

    /// The history row of `target` at `version`.
    pub(crate) async fn history_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError> {
        self.store.history_version(target, version).await
    }

    /// Records an event that is not a rule or override change (a counter reset, …) in the
    /// history, now; returns its row. See [`super::history::record_event`].
    pub(crate) async fn record_event(&self, event: Event) -> Result<HistoryEntry, RecordError> {
        super::history::record_event(self.store.as_ref(), event, self.clock.now()).await
    }

    /// Re-reads the database every `interval` until `stop`; after a failure, retries sooner
    /// (1 s, doubling up to `interval`) and keeps the index in service meanwhile.
    pub(crate) async fn refresh_loop(
        self: Arc<Self>,
        interval: Duration,
        stop: impl Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let mut wait = interval;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(wait) => {}
            }
            if !self.is_open() {
                // The opener retries and logs; nothing to re-read yet.
                continue;
            }
            wait = match self.refresh().await {
                Ok(_) => interval,
                Err(e) => {
                    tracing::warn!(error = %e, "policy refresh failed; keeping the overrides in service");
                    let first = Duration::from_secs(1).min(interval);
                    if wait == interval {
                        first
                    } else {
                        (wait * 2).min(interval)
                    }
                }
            };
        }
    }
}
