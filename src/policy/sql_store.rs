//! The [`PolicyStore`] of both SQL backends, written once over [`SqlBackend`]: each rule or
//! override write runs in one transaction with its history row (the backend serialises the
//! writers and tells the others after the commit), and every statement comes from the builders
//! shared by both (`history_sql`, `override_sql`, `violations::sql`), whose [`sqlx::QueryBuilder`]
//! numbers the placeholders the way each database wants.
//!
//! The `where` clause lists what those builders and row readers need of the driver; SQLite and
//! PostgreSQL both have it (the schema uses only TEXT, BIGINT and BOOLEAN).

use async_trait::async_trait;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::backend::SqlBackend;
use super::history::{Audit, Event, HistoryEntry, HistoryQuery, override_event, rule_event};
use super::history_sql::{self as hsql, RULE_COLUMNS};
use super::model::{NewOverride, StoredOverride};
use super::override_sql::{self, COLUMNS, OverridePage};
use super::rows::{read_override, read_rule};
use super::rules::Rule;
use super::sql_parts;
use super::store::{PolicyStore, StoreError};
use super::violations::{StoredViolation, ViolationQuery, sql};
use ratelimitd_core::clock::Timestamp;

/// The audited delete of an override or a rule: looked up in the transaction (none: `false`,
/// nothing written), deleted, and recorded with its last state. A macro, not a function, because
/// a function would have to restate every driver bound of the impl below.
macro_rules! audited_delete {
    ($store:ident, overrides, $id:ident, $audit:ident, $now:ident) => {{
        let (table, read, event) = ("rate_limit_overrides", read_override, override_event);
        audited_delete!($store, table, COLUMNS, read, event, $id, $audit, $now)
    }};
    ($store:ident, rules, $id:ident, $audit:ident, $now:ident) => {{
        let (table, read, event) = ("rate_limit_rules", read_rule, rule_event);
        audited_delete!($store, table, RULE_COLUMNS, read, event, $id, $audit, $now)
    }};
    (
        $store:ident, $table:ident, $columns:ident, $read:ident, $event:ident,
        $id:ident, $audit:ident, $now:ident
    ) => {{
        let mut tx = $store.begin().await?;
        let row = B::query(&mut hsql::select_by_id::<B::Db>($columns, $table, $id))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(before) = row.as_ref().map($read).transpose()? else {
            return Ok(false);
        };
        B::query(&mut hsql::delete_by_id::<B::Db>($table, $id))
            .execute(&mut *tx)
            .await?;
        let e = $event(Some(&before), None, $audit);
        let row = B::query(&mut hsql::insert(&e, $now))
            .fetch_one(&mut *tx)
            .await?;
        hsql::read(&row)?;
        $store.commit_change(tx).await?;
        Ok(true)
    }};
}

#[async_trait]
impl<B> PolicyStore for B
where
    B: SqlBackend,
    B::Db: sqlx::database::HasStatementCache,
    for<'c> &'c mut <B::Db as Database>::Connection: Executor<'c, Database = B::Db>,
    for<'q> <B::Db as Database>::Arguments<'q>: IntoArguments<'q, B::Db>,
    for<'q> &'q str: Encode<'q, B::Db> + Type<B::Db> + ColumnIndex<<B::Db as Database>::Row>,
    for<'q> Option<&'q str>: Encode<'q, B::Db> + Type<B::Db>,
    for<'q> String: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<String>: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> i64: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> Option<i64>: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    for<'q> bool: Encode<'q, B::Db> + Decode<'q, B::Db> + Type<B::Db>,
    usize: ColumnIndex<<B::Db as Database>::Row>,
{
    async fn insert_override(
        &self,
        id: &str,
        o: &NewOverride,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError> {
        let mut tx = self.begin().await?;
        B::query(&mut hsql::insert_override::<B::Db>(id, o, &audit.who, now))
            .execute(&mut *tx)
            .await?;
        let stored = StoredOverride {
            id: id.to_string(),
            spec: o.clone(),
            created_by: audit.who.clone(),
            created_at: now,
        };
        // The history row carries the override's own reason.
        let by = Audit {
            reason: o.reason.clone(),
            ..audit.clone()
        };
        let e = override_event(None, Some(&stored), &by);
        let row = B::query(&mut hsql::insert(&e, now))
            .fetch_one(&mut *tx)
            .await?;
        hsql::read(&row)?;
        self.commit_change(tx).await?;
        Ok(stored)
    }

    async fn active_overrides(&self, now: Timestamp) -> Result<Vec<StoredOverride>, StoreError> {
        let mut b = override_sql::list::<B::Db>(Some(now));
        let rows = B::query(&mut b).fetch_all(self.pool().await?).await?;
        rows.iter().map(read_override).collect()
    }

    async fn all_overrides(&self) -> Result<Vec<StoredOverride>, StoreError> {
        let mut b = override_sql::list::<B::Db>(None);
        let rows = B::query(&mut b).fetch_all(self.pool().await?).await?;
        rows.iter().map(read_override).collect()
    }

    async fn count_active_overrides(&self, now: Timestamp) -> Result<u64, StoreError> {
        let mut b = override_sql::count_active::<B::Db>(now);
        let row = B::query(&mut b).fetch_one(self.pool().await?).await?;
        let n: i64 = row.try_get(0)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn overrides_page(&self, page: &OverridePage) -> Result<Vec<StoredOverride>, StoreError> {
        let mut b = override_sql::page::<B::Db>(page);
        let rows = B::query(&mut b).fetch_all(self.pool().await?).await?;
        rows.iter().map(read_override).collect()
    }

    async fn delete_overrides_expired_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let mut b =
            sql_parts::delete_before::<B::Db>("rate_limit_overrides", "valid_until", before, batch);
        let done = B::query(&mut b).execute(self.pool().await?).await?;
        Ok(B::rows_affected(&done))
    }

    async fn delete_override(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        audited_delete!(self, overrides, id, audit, now)
    }

    async fn put_rule(
        &self,
        rule: &Rule,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<HistoryEntry, StoreError> {
        let mut tx = self.begin().await?;
        let row = B::query(&mut hsql::select_by_id::<B::Db>(
            RULE_COLUMNS,
            "rate_limit_rules",
            &rule.id,
        ))
        .fetch_optional(&mut *tx)
        .await?;
        let before = row.as_ref().map(read_rule).transpose()?;
        B::query(&mut hsql::upsert_rule::<B::Db>(rule, &audit.who, now))
            .execute(&mut *tx)
            .await?;
        let e = rule_event(before.as_ref(), Some(rule), audit);
        let row = B::query(&mut hsql::insert(&e, now))
            .fetch_one(&mut *tx)
            .await?;
        let entry = hsql::read(&row)?;
        self.commit_change(tx).await?;
        Ok(entry)
    }

    async fn rules(&self) -> Result<Vec<Rule>, StoreError> {
        let sql = format!("SELECT {RULE_COLUMNS} FROM rate_limit_rules ORDER BY id");
        let rows = sqlx::query(&sql).fetch_all(self.pool().await?).await?;
        rows.iter().map(read_rule).collect()
    }

    async fn delete_rule(
        &self,
        id: &str,
        audit: &Audit,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        audited_delete!(self, rules, id, audit, now)
    }

    async fn record(&self, event: &Event, now: Timestamp) -> Result<HistoryEntry, StoreError> {
        let mut tx = self.begin().await?;
        let row = B::query(&mut hsql::insert(event, now))
            .fetch_one(&mut *tx)
            .await?;
        let entry = hsql::read(&row)?;
        // Neither a rule nor an override changed: nobody has anything to re-read.
        tx.commit().await?;
        Ok(entry)
    }

    async fn history(&self, q: &HistoryQuery) -> Result<Vec<HistoryEntry>, StoreError> {
        let rows = B::query(&mut hsql::select::<B::Db>(q))
            .fetch_all(self.pool().await?)
            .await?;
        rows.iter().map(hsql::read).collect()
    }

    async fn history_version(
        &self,
        target: &str,
        version: u64,
    ) -> Result<Option<HistoryEntry>, StoreError> {
        let row = B::query(&mut hsql::select_version::<B::Db>(target, version))
            .fetch_optional(self.pool().await?)
            .await?;
        row.as_ref().map(hsql::read).transpose()
    }

    async fn insert_violations(&self, batch: &[StoredViolation]) -> Result<u64, StoreError> {
        // A multi-row INSERT of no rows is not SQL.
        if batch.is_empty() {
            return Ok(0);
        }
        let mut b = sql::insert::<B::Db>(batch);
        let done = B::query(&mut b).execute(self.pool().await?).await?;
        Ok(B::rows_affected(&done))
    }

    async fn violations(&self, q: &ViolationQuery) -> Result<Vec<StoredViolation>, StoreError> {
        let mut b = sql::select::<B::Db>(q);
        let rows = B::query(&mut b).fetch_all(self.pool().await?).await?;
        rows.iter().map(sql::read).collect()
    }

    async fn delete_violations_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let mut b = sql_parts::delete_before::<B::Db>("rate_limit_violations", "at", before, batch);
        let done = B::query(&mut b).execute(self.pool().await?).await?;
        Ok(B::rows_affected(&done))
    }
}
