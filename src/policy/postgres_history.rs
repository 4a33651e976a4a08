//! The PostgreSQL backend's writes of rules and overrides, each in one transaction with its
//! history row. A transaction-scoped advisory lock serialises these writers across instances, so
//! the history's numbering never collides; every write is followed by a notification.

use sqlx::Postgres;

use super::history::{Audit, Event, HistoryEntry, HistoryQuery, override_event, rule_event};
use super::history_sql as hsql;
use super::model::{NewOverride, StoredOverride};
use super::postgres::PgStore;
use super::rows::{read_override, read_rule};
use super::rules::Rule;
use super::store::StoreError;
use ratelimitd_core::clock::Timestamp;

type Tx = sqlx::Transaction<'static, Postgres>;

impl PgStore {
    async fn begin(&self) -> Result<Tx, StoreError> {
        let mut tx = self.ready().await?.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(hsql::PG_LOCK)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    async fn write_history(
        tx: &mut Tx,
        e: &Event,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        let row = hsql::insert::<Postgres>(e, now)
            .build()
            .fetch_one(&mut **tx)
            .await?;
        hsql::read(&row)
    }

    /// Commits `tx` and tells the other instances.
    async fn commit(&self, tx: Tx) -> Result<(), StoreError> {
        tx.commit().await?;
        self.notify().await
    }

    pub(super) async fn audited_insert_override(
        &self,
        id: &str,
        o: &NewOverride,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError> {
        let mut tx = self.begin().await?;
        hsql::insert_override::<Postgres>(id, o, &audit.who, now)
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
        self.commit(tx).await?;
        Ok(stored)
    }

    pub(super) async fn audited_delete_override(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let row = hsql::override_by_id::<Postgres>(id)
            .build()
            .fetch_optional(&mut *tx)
            .await?;
        let Some(before) = row.as_ref().map(read_override).transpose()? else {
            return Ok(false);
        };
        hsql::delete_by_id::<Postgres>("rate_limit_overrides", id)
            .build()
            .execute(&mut *tx)
            .await?;
        Self::write_history(&mut tx, &override_event(Some(&before), None, audit), now).await?;
        self.commit(tx).await?;
        Ok(true)
    }

    pub(super) async fn audited_put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        let mut tx = self.begin().await?;
        let row = hsql::rule_by_id::<Postgres>(&rule.id)
            .build()
            .fetch_optional(&mut *tx)
            .await?;
        let before = row.as_ref().map(read_rule).transpose()?;
        hsql::upsert_rule::<Postgres>(rule, &audit.who, now)
            .build()
            .execute(&mut *tx)
            .await?;
        let e = rule_event(before.as_ref(), Some(rule), audit);
        let entry = Self::write_history(&mut tx, &e, now).await?;
        self.commit(tx).await?;
        Ok(entry)
    }

    pub(super) async fn audited_delete_rule(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let row = hsql::rule_by_id::<Postgres>(id)
            .build()
            .fetch_optional(&mut *tx)
            .await?;
        let Some(before) = row.as_ref().map(read_rule).transpose()? else {
            return Ok(false);
        };
        hsql::delete_by_id::<Postgres>("rate_limit_rules", id)
            .build()
            .execute(&mut *tx)
            .await?;
        Self::write_history(&mut tx, &rule_event(Some(&before), None, audit), now).await?;
        self.commit(tx).await?;
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
        let rows = hsql::select::<Postgres>(q)
            .build()
            .fetch_all(self.ready().await?)
            .await?;
        rows.iter().map(hsql::read).collect()
    }

    pub(super) async fn select_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError> {
        let row = hsql::select_version::<Postgres>(target, version)
            .build()
            .fetch_optional(self.ready().await?)
            .await?;
        row.as_ref().map(hsql::read).transpose()
    }
}
