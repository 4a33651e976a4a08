//! The embedded backend: one SQLite file (`policy.db` in `RATELIMITD_DATA_DIR`) through sqlx,
//! migrated at open. WAL mode lets the API write while the refresh task reads.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Sqlite;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

use super::history::{Audit, Event, HistoryEntry, HistoryQuery};
use super::model::{NewOverride, StoredOverride};
use super::override_sql::{self, COLUMNS, OverridePage};
use super::rows::{micros, read_override};
use super::rules::Rule;
use super::store::{PolicyStore, StoreError, migrator};
use super::violations::{StoredViolation, ViolationQuery, sql};
use ratelimitd_core::clock::Timestamp;

/// The policy database in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqliteStore {
    pub(super) pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating it when missing) and migrates `dir/policy.db`; `dir` is created too.
    pub(crate) async fn open(dir: &Path) -> Result<SqliteStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(sqlx::Error::Io)?;
        let options = SqliteConnectOptions::new()
            .filename(dir.join("policy.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await?;
        migrator().run(&pool).await?;
        Ok(SqliteStore { pool })
    }

    async fn select(&self, filter: &str, now: i64) -> Result<Vec<StoredOverride>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM rate_limit_overrides {filter} ORDER BY created_at DESC, id DESC"
        );
        let rows = sqlx::query(&sql).bind(now).fetch_all(&self.pool).await?;
        rows.iter().map(read_override).collect()
    }
}

#[async_trait]
impl PolicyStore for SqliteStore {
    async fn insert_override(
        &self,
        id: &str,
        o: &NewOverride,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError> {
        self.audited_insert_override(id, o, audit, now).await
    }

    async fn active_overrides(&self, now: Timestamp) -> Result<Vec<StoredOverride>, StoreError> {
        self.select("WHERE valid_until > ?", micros(now)).await
    }

    async fn all_overrides(&self) -> Result<Vec<StoredOverride>, StoreError> {
        // `? IS NOT NULL` keeps one bind for both queries.
        self.select("WHERE ? IS NOT NULL", 0).await
    }

    async fn count_active_overrides(&self, now: Timestamp) -> Result<u64, StoreError> {
        let mut b = override_sql::count_active::<Sqlite>(now);
        let n: i64 = b.build_query_scalar().fetch_one(&self.pool).await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn overrides_page(&self, page: &OverridePage) -> Result<Vec<StoredOverride>, StoreError> {
        let mut b = override_sql::page::<Sqlite>(page);
        let rows = b.build().fetch_all(&self.pool).await?;
        rows.iter().map(read_override).collect()
    }

    async fn delete_overrides_expired_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let mut b = override_sql::delete_expired::<Sqlite>(before, batch);
        Ok(b.build().execute(&self.pool).await?.rows_affected())
    }

    async fn delete_override(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.audited_delete_override(id, audit, now).await
    }

    async fn put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        self.audited_put_rule(rule, audit, now).await
    }

    async fn rules(&self) -> Result<Vec<Rule>, StoreError> {
        self.select_rules().await
    }

    async fn delete_rule(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.audited_delete_rule(id, audit, now).await
    }

    async fn record(&self, event: &Event, now: Timestamp) -> Result<HistoryEntry, StoreError> {
        self.record_event(event, now).await
    }

    async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>, StoreError> {
        self.select_history(q).await
    }

    async fn history_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError> {
        self.select_version(target, version).await
    }

    async fn insert_violations(&self, batch: &[StoredViolation]) -> Result<u64, StoreError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let mut q = sql::insert::<Sqlite>(batch);
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn violations(&self, q: &ViolationQuery) -> Result<Vec<StoredViolation>, StoreError> {
        let mut b = sql::select::<Sqlite>(q);
        let rows = b.build().fetch_all(&self.pool).await?;
        rows.iter().map(sql::read).collect()
    }

    async fn delete_violations_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let mut b = sql::delete_before::<Sqlite>(before, batch);
        Ok(b.build().execute(&self.pool).await?.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::PathEntry;
    use ratelimitd_core::config::Unit;

    fn spec(value: &str, until: u64) -> NewOverride {
        NewOverride {
            domain: "api".into(),
            descriptor: vec![PathEntry {
                key: "client_key".into(),
                value: value.into(),
            }],
            requests_per_unit: 7,
            unit: Unit::Minute,
            valid_until: Timestamp::from_secs(until),
            reason: "why".into(),
        }
    }

    #[tokio::test]
    async fn overrides_round_trip_through_a_real_file_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let t = Timestamp::from_secs(100);
        store
            .insert_override("ov_a", &spec("a", 200), &Audit::new("ops", ""), t)
            .await
            .unwrap();
        store
            .insert_override("ov_b", &spec("b", 150), &Audit::new("ops", ""), t)
            .await
            .unwrap();
        assert_eq!(
            store
                .active_overrides(Timestamp::from_secs(160))
                .await
                .unwrap()
                .len(),
            1
        );
        drop(store);
        // Opening again runs the migrations again: already applied, nothing changes.
        let store = SqliteStore::open(dir.path()).await.unwrap();
        let all = store.all_overrides().await.unwrap();
        assert_eq!(all.len(), 2);
        let a = all.iter().find(|o| o.id == "ov_a").unwrap();
        assert_eq!(a.spec, spec("a", 200));
        assert_eq!((a.created_by.as_str(), a.created_at), ("ops", t));
        let ops = Audit::new("ops", "done");
        assert!(store.delete_override("ov_a", &ops, t).await.unwrap());
        assert!(!store.delete_override("ov_a", &ops, t).await.unwrap());
        assert_eq!(store.all_overrides().await.unwrap().len(), 1);
    }
}
