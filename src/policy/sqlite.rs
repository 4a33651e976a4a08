//! The embedded backend: one SQLite file (`policy.db` in `RATELIMITD_DATA_DIR`) through sqlx,
//! migrated at open. WAL mode lets the API write while the refresh task reads.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteQueryResult,
};
use sqlx::{QueryBuilder, Sqlite, Transaction};

use super::backend::SqlBackend;
use super::store::{StoreError, migrator};

/// The policy database in a SQLite file.
#[derive(Debug, Clone)]
pub(crate) struct SqliteStore {
    pool: SqlitePool,
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
}

#[async_trait]
impl SqlBackend for SqliteStore {
    type Db = Sqlite;

    async fn pool(&self) -> Result<&SqlitePool, StoreError> {
        Ok(&self.pool)
    }

    /// `BEGIN IMMEDIATE` takes the write lock first, so that a concurrent violation batch cannot
    /// make the transaction's later write fail as busy.
    async fn begin(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Nothing to send: SQLite has no notifications. This instance's policy applies its own
    /// writes; another process on the same file sees them at its next refresh.
    async fn changed(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn query<'s, 'a: 's>(
        b: &'s mut QueryBuilder<'a, Sqlite>,
    ) -> Query<'s, Sqlite, SqliteArguments<'s>> {
        b.build()
    }

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::history::Audit;
    use crate::policy::model::{NewOverride, PathEntry};
    use crate::policy::store::PolicyStore;
    use ratelimitd_core::clock::Timestamp;
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
