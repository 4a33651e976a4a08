//! The policy database at run time: opened at startup (SQLite, or PostgreSQL with
//! `POLICY_DB_URL`, even when it is not reachable yet; or off, with the reason logged), written
//! through by the admin API, and read
//! into the [`Overrides`] index after every write, on every PostgreSQL notification and on a
//! timer, retrying with backoff while the database fails (the last index stays in service).

use std::sync::Arc;
use std::time::Duration;

use super::index::{OverrideIndex, Overrides};
use super::model::{NewOverride, StoredOverride};
use super::postgres::PgStore;
use super::rules::Rule;
use super::sqlite::SqliteStore;
use super::store::{PolicyStore, StoreError};
use crate::clock::Clock;
use crate::settings::PolicySettings;

/// Why a write was refused.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// `POLICY_MAX_OVERRIDES` active overrides exist already.
    #[error("{0} active overrides exist already (POLICY_MAX_OVERRIDES)")]
    TooMany(usize),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The open policy database and the index it feeds.
#[derive(Debug)]
pub struct Policy {
    store: Arc<dyn PolicyStore>,
    overrides: Arc<Overrides>,
    clock: Arc<dyn Clock>,
    max_overrides: usize,
    // Writes one at a time, so the cap check and the insert cannot interleave.
    writes: tokio::sync::Mutex<()>,
}

impl Policy {
    /// Opens the database the settings name and loads the index; `Err` says why the policy API
    /// is off (the caller logs it and serves files as before).
    pub async fn open(
        settings: &PolicySettings,
        clock: Arc<dyn Clock>,
        overrides: Arc<Overrides>,
    ) -> Result<Policy, String> {
        if !settings.enabled {
            return Err("POLICY_ENABLED is false".into());
        }
        let store: Arc<dyn PolicyStore> = match &settings.db_url {
            Some(url) => {
                Arc::new(PgStore::open(&url.0).map_err(|e| format!("POLICY_DB_URL: {e}"))?)
            }
            None => {
                let dir = &settings.data_dir;
                let store = SqliteStore::open(dir)
                    .await
                    .map_err(|e| format!("no usable data directory {}: {e}", dir.display()))?;
                Arc::new(store)
            }
        };
        let policy = Policy {
            store,
            overrides,
            clock,
            max_overrides: settings.max_overrides,
            writes: tokio::sync::Mutex::new(()),
        };
        match policy.refresh().await {
            Ok(_) => {}
            // A shared database that is down at startup is retried by the refresh loop and the
            // notification listener (with backoff); meanwhile the files serve and the API
            // answers 503. An embedded one that cannot be read is a broken data directory.
            Err(e) if settings.db_url.is_some() => {
                tracing::warn!(error = %e, "policy database not reachable at startup; serving the files and retrying");
            }
            Err(e) => return Err(e.to_string()),
        }
        Ok(policy)
    }

    /// The database (the violation log writes and reads through it).
    pub fn store(&self) -> &Arc<dyn PolicyStore> {
        &self.store
    }

    /// The service clock (expiry and timestamps).
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Reads every active override into a new index and swaps it in; returns how many.
    pub async fn refresh(&self) -> Result<usize, StoreError> {
        let active = self.store.active_overrides(self.clock.now()).await?;
        let n = active.len();
        self.overrides.publish(OverrideIndex::new(active));
        Ok(n)
    }

    /// Stores an override created by `who` and puts it in service before returning.
    pub async fn create_override(
        &self,
        o: NewOverride,
        who: &str,
    ) -> Result<StoredOverride, WriteError> {
        let _one = self.writes.lock().await;
        let now = self.clock.now();
        let active = self.store.active_overrides(now).await?.len();
        if active >= self.max_overrides {
            return Err(WriteError::TooMany(active));
        }
        let id = format!("ov_{:016x}", fastrand::u64(..));
        let stored = self.store.insert_override(&id, &o, who, now).await?;
        self.refresh().await?;
        Ok(stored)
    }

    /// Every stored override, expired ones included.
    pub async fn list_overrides(&self) -> Result<Vec<StoredOverride>, StoreError> {
        self.store.all_overrides().await
    }

    /// Deletes override `id` and takes it out of service; `false` when there is none.
    pub async fn delete_override(&self, id: &str) -> Result<bool, StoreError> {
        let _one = self.writes.lock().await;
        let found = self.store.delete_override(id).await?;
        if found {
            self.refresh().await?;
        }
        Ok(found)
    }

    /// Holds off other writers until dropped: a rule change checks, stores and publishes under it.
    pub async fn lock_writes(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writes.lock().await
    }

    /// Every rule, by id.
    pub async fn rules(&self) -> Result<Vec<Rule>, StoreError> {
        self.store.rules().await
    }

    /// Stores `rule` (under [`Policy::lock_writes`], after checking it compiles).
    pub async fn put_rule(&self, rule: &Rule, who: &str) -> Result<(), StoreError> {
        self.store.put_rule(rule, who, self.clock.now()).await
    }

    /// Deletes rule `id` (under [`Policy::lock_writes`]); `false` when there is none.
    pub async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        self.store.delete_rule(id).await
    }

    /// Re-reads the database every `interval` until `stop`; after a failure, retries sooner
    /// (1 s, doubling up to `interval`) and keeps the index in service meanwhile.
    pub async fn refresh_loop(self: Arc<Self>, interval: Duration, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut wait = interval;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(wait) => {}
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
