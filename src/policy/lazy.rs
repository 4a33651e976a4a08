//! A policy database that may not be open yet: every call goes to the real backend once
//! [`LazyStore::set`] installed it, and until then answers [`StoreError::NotOpen`] (the API
//! answers 503, the violation log drops its batches) while the opener retries in the background.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use parking_lot::Mutex;

use super::history::{Audit, Event, HistoryEntry, HistoryQuery};
use super::model::{NewOverride, StoredOverride};
use super::override_sql::OverridePage;
use super::rules::Rule;
use super::store::{PolicyStore, StoreError};
use super::violations::{StoredViolation, ViolationQuery};
use ratelimitd_core::clock::Timestamp;

/// The backend once open, else why not.
#[derive(Debug)]
pub(crate) struct LazyStore {
    db: String,
    open: OnceLock<Arc<dyn PolicyStore>>,
    why: Mutex<String>,
}

impl LazyStore {
    /// A store named `db` (the SQLite file or the PostgreSQL target) that is not open yet.
    pub(crate) fn new(db: String) -> LazyStore {
        LazyStore {
            db,
            open: OnceLock::new(),
            why: Mutex::new("not opened yet".into()),
        }
    }

    /// Which database this is, for logs.
    pub(crate) fn name(&self) -> &str {
        &self.db
    }

    /// True once the backend is installed.
    pub(crate) fn is_open(&self) -> bool {
        self.open.get().is_some()
    }

    /// Installs the opened backend (the first one wins; there is only one opener).
    pub(crate) fn set(&self, store: Arc<dyn PolicyStore>) {
        let _ = self.open.set(store);
    }

    /// Records why the latest attempt to open failed.
    pub(crate) fn set_failure(&self, why: String) {
        *self.why.lock() = why;
    }

    /// Why the latest attempt to open failed.
    pub(crate) fn failure(&self) -> String {
        self.why.lock().clone()
    }

    fn get(&self) -> Result<&Arc<dyn PolicyStore>, StoreError> {
        self.open.get().ok_or_else(|| StoreError::NotOpen {
            db: self.db.clone(),
            why: self.why.lock().clone(),
        })
    }
}

#[async_trait]
impl PolicyStore for LazyStore {
    async fn insert_override(
        &self,
        id: &str,
        o: &NewOverride,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError> {
        self.get()?.insert_override(id, o, audit, now).await
    }

    async fn active_overrides(&self, now: Timestamp) -> Result<Vec<StoredOverride>, StoreError> {
        self.get()?.active_overrides(now).await
    }

    async fn all_overrides(&self) -> Result<Vec<StoredOverride>, StoreError> {
        self.get()?.all_overrides().await
    }

    async fn count_active_overrides(&self, now: Timestamp) -> Result<u64, StoreError> {
        self.get()?.count_active_overrides(now).await
    }

    async fn overrides_page(&self, page: &OverridePage) -> Result<Vec<StoredOverride>, StoreError> {
        self.get()?.overrides_page(page).await
    }

    async fn delete_overrides_expired_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        self.get()?
            .delete_overrides_expired_before(before, batch)
            .await
    }

    async fn delete_override(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.get()?.delete_override(id, audit, now).await
    }

    async fn put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        self.get()?.put_rule(rule, audit, now).await
    }

    async fn rules(&self) -> Result<Vec<Rule>, StoreError> {
        self.get()?.rules().await
    }

    async fn delete_rule(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.get()?.delete_rule(id, audit, now).await
    }

    async fn record(&self, event: &Event, now: Timestamp) -> Result<HistoryEntry, StoreError> {
        self.get()?.record(event, now).await
    }

    async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>, StoreError> {
        self.get()?.history(q).await
    }

    async fn history_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError> {
        self.get()?.history_version(target, version).await
    }

    async fn insert_violations(&self, batch: &[StoredViolation]) -> Result<u64, StoreError> {
        self.get()?.insert_violations(batch).await
    }

    async fn violations(&self, q: &ViolationQuery) -> Result<Vec<StoredViolation>, StoreError> {
        self.get()?.violations(q).await
    }

    async fn delete_violations_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        self.get()?.delete_violations_before(before, batch).await
    }
}
