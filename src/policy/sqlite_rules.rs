//! The SQLite backend's writes of rules and overrides, each in one `BEGIN IMMEDIATE` transaction
//! with its history row (the write lock is taken first, so a concurrent violation batch cannot
//! make the transaction's later write fail), and its history reads.

use sqlx::Sqlite;

use super::history::{Audit, Event, HistoryEntry, HistoryQuery, override_event, rule_event};
use super::history_sql as hsql;
use super::model::{NewOverride, StoredOverride};
use super::rows::{read_override, read_rule};
use super::rules::Rule;
use super::sqlite::SqliteStore;
use super::store::StoreError;
use ratelimitd_core::clock::Timestamp;

type Tx = sqlx::Transaction<'static, Sqlite>;

impl SqliteStore {
    async fn begin(&self) -> Result<Tx, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn write_history(
        tx: &mut Tx,
        e: &Event,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        let row = hsql::insert::<Sqlite>(e, now)
            .build()
            .fetch_one(&mut **tx)
            .await?;
        hsql::read(&row)
    }

    async fn rule_in(tx: &mut Tx, id: &str) -> Result<Option<Rule>, StoreError> {
        let row = hsql::rule_by_id::<Sqlite>(id)
            .build()
            .fetch_optional(&mut **tx)
            .await?;
        row.as_ref().map(read_rule).transpose()
    }

    pub(super) async fn audited_insert_override(
        &self,
        id: &str,
        o: &NewOverride,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError> {
        let mut tx = self.begin().await?;
        hsql::insert_override::<Sqlite>(id, o, &audit.who, now)
            .build()
            .execute(&mut *tx)
            .await?;
        let stored = StoredOverride {
            id: id.to_string(),
            spec: o.clone(),
            created_by: audit.who.clone(),
            created_at: now,
        };
        let by = Audit {
            reason: o.reason.clone(),
            ..audit.clone()
        };
        Self::write_history(&mut tx, &override_event(None, Some(&stored), &by), now).await?;
        tx.commit().await?;
        Ok(stored)
    }

    pub(super) async fn audited_delete_override(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let row = hsql::override_by_id::<Sqlite>(id)
            .build()
            .fetch_optional(&mut *tx)
            .await?;
        let Some(before) = row.as_ref().map(read_override).transpose()? else {
            return Ok(false);
        };
        hsql::delete_by_id::<Sqlite>("rate_limit_overrides", id)
            .build()
            .execute(&mut *tx)
            .await?;
        Self::write_history(&mut tx, &override_event(Some(&before), None, audit), now).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn audited_put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        let mut tx = self.begin().await?;
        let before = Self::rule_in(&mut tx, &rule.id).await?;
        hsql::upsert_rule::<Sqlite>(rule, &audit.who, now)
            .build()
            .execute(&mut *tx)
            .await?;
        let e = rule_event(before.as_ref(), Some(rule), audit);
        let entry = Self::write_history(&mut tx, &e, now).await?;
        tx.commit().await?;
        Ok(entry)
    }

    pub(super) async fn audited_delete_rule(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let Some(before) = Self::rule_in(&mut tx, id).await? else {
            return Ok(false);
        };
        hsql::delete_by_id::<Sqlite>("rate_limit_rules", id)
            .build()
            .execute(&mut *tx)
            .await?;
        Self::write_history(&mut tx, &rule_event(Some(&before), None, audit), now).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn record_event(
        &self,
        e: &Event,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        let mut tx = self.begin().await?;
        let entry = Self::write_history(&mut tx, e, now).await?;
        tx.commit().await?;
        Ok(entry)
    }

    pub(super) async fn select_history(
        &self,
        q: &HistoryQuery,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let rows = hsql::select::<Sqlite>(q)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(hsql::read).collect()
    }

    pub(super) async fn select_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError> {
        let row = hsql::select_version::<Sqlite>(target, version)
            .build()
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(hsql::read).transpose()
    }

    pub(super) async fn select_rules(&self) -> Result<Vec<Rule>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, domain, descriptor, rate_limit, enabled FROM rate_limit_rules ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(read_rule).collect()
    }
}
