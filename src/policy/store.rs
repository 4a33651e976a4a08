//! The interface every policy database backend implements, and the versioned migrations that
//! create its schema (`migrations/` in the repository, compiled into the binary).

use std::borrow::Cow;

use async_trait::async_trait;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use super::history::{Audit, Event, HistoryEntry, HistoryQuery};
use super::model::{NewOverride, StoredOverride};
use super::override_sql::OverridePage;
use super::rules::Rule;
use super::violations::{StoredViolation, ViolationQuery};
use ratelimitd_core::clock::Timestamp;

/// Why the policy database could not answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The database failed or is unreachable (the API answers 503).
    #[error("policy database unavailable: {0}")]
    Unavailable(#[from] sqlx::Error),
    /// The schema could not be migrated.
    #[error("policy database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database could not be opened (yet): the service retries in the background.
    #[error("policy database {db} is not open: {why}")]
    NotOpen {
        /// Which database (the SQLite file, or `POLICY_DB_URL`).
        db: String,
        /// Why the last attempt failed.
        why: String,
    },
    /// A stored row that does not read back (edited by hand?).
    #[error("policy database row {id} is invalid: {why}")]
    BadRow {
        /// The row's id.
        id: String,
        /// What is wrong.
        why: String,
    },
}

/// A policy database: rules, time-limited overrides and the violation log.
#[async_trait]
pub(crate) trait PolicyStore: Send + Sync + std::fmt::Debug + 'static {
    /// Stores `o` under `id`, created by `audit.who` at `now`, with its history row.
    async fn insert_override(
        &self,
        id: &str,
        o: &NewOverride,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError>;

    /// Every override whose `valid_until` is after `now` (newest first).
    async fn active_overrides(&self, now: Timestamp) -> Result<Vec<StoredOverride>, StoreError>;

    /// Every stored override, expired ones included (newest first).
    async fn all_overrides(&self) -> Result<Vec<StoredOverride>, StoreError>;

    /// How many overrides are active at `now` (one `COUNT`, no rows read).
    async fn count_active_overrides(&self, now: Timestamp) -> Result<u64, StoreError>;

    /// One page of stored overrides, expired ones included, newest first (by creation time,
    /// then id): at most `page.limit + 1` (the extra one says whether there is a next page).
    async fn overrides_page(&self, page: &OverridePage) -> Result<Vec<StoredOverride>, StoreError>;

    /// Deletes at most `batch` overrides whose `valid_until` is before `before`; returns how many.
    async fn delete_overrides_expired_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError>;

    /// Deletes override `id` with its history row; `false` when there is none.
    async fn delete_override(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Creates or replaces rule `rule.id`, written by `audit.who` at `now`, with its history row
    /// (returned).
    async fn put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError>;

    /// Every rule, by id.
    async fn rules(&self) -> Result<Vec<Rule>, StoreError>;

    /// Deletes rule `id` with its history row; `false` when there is none.
    async fn delete_rule(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Records `event` at `now` in the history; returns its row.
    async fn record(&self, event: &Event, now: Timestamp) -> Result<HistoryEntry, StoreError>;

    /// The history rows `q` selects, newest first, at most `q.limit + 1`.
    async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>, StoreError>;

    /// The row of `target` at `version`, if there is one.
    async fn history_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError>;

    /// Writes a batch of violations (ids chosen by the caller) in one statement.
    async fn insert_violations(&self, batch: &[StoredViolation]) -> Result<u64, StoreError>;

    /// The violations `q` selects, newest first, at most `q.limit + 1` (the extra one says
    /// whether there is a next page).
    async fn violations(&self, q: &ViolationQuery) -> Result<Vec<StoredViolation>, StoreError>;

    /// Deletes at most `batch` violations older than `before`; returns how many.
    async fn delete_violations_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError>;
}

/// The migrations of `migrations/`, in version order. Their SQL is portable between SQLite and
/// PostgreSQL, so both backends share them.
pub(crate) fn migrator() -> Migrator {
    let baseline = Migration::new(
        1,
        Cow::Borrowed("baseline"),
        MigrationType::Simple,
        Cow::Borrowed(include_str!("../../migrations/0001_baseline.sql")),
        false,
    );
    let rule_body = Migration::new(
        2,
        Cow::Borrowed("rule body"),
        MigrationType::Simple,
        Cow::Borrowed(include_str!("../../migrations/0002_rule_body.sql")),
        false,
    );
    let violations = Migration::new(
        3,
        Cow::Borrowed("violations"),
        MigrationType::Simple,
        Cow::Borrowed(include_str!("../../migrations/0003_violations.sql")),
        false,
    );
    let requests = Migration::new(
        4,
        Cow::Borrowed("violation requests"),
        MigrationType::Simple,
        Cow::Borrowed(include_str!("../../migrations/0004_violation_requests.sql")),
        false,
    );
    let class = Migration::new(
        5,
        Cow::Borrowed("violation class"),
        MigrationType::Simple,
        Cow::Borrowed(include_str!("../../migrations/0005_violation_class.sql")),
        false,
    );
    let history = Migration::new(
        6,
        Cow::Borrowed("history"),
        MigrationType::Simple,
        Cow::Borrowed(include_str!("../../migrations/0006_history.sql")),
        false,
    );
    Migrator {
        migrations: Cow::Owned(vec![
            baseline, rule_body, violations, requests, class, history,
        ]),
        ..Migrator::DEFAULT
    }
}
