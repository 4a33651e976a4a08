//! The fleet backend: PostgreSQL (`POLICY_DB_URL`) through sqlx, shared by every instance and
//! migrated by the same migrations as SQLite. Every write is followed by a `pg_notify` on
//! [`CHANNEL`], so the other instances re-read at once ([`listen`]).
//!
//! The pool connects lazily and the migrations run on the first call that reaches the database:
//! a database that is down when ratelimitd starts does not stop it (files serve at once, the API
//! answers 503) and is picked up when it answers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Postgres;
use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};

use super::history::{Audit, Event, HistoryEntry, HistoryQuery};
use super::model::{NewOverride, StoredOverride};
use super::override_sql::{self, COLUMNS, OverridePage};
use super::rows::{micros, read_override, read_rule};
use super::rules::Rule;
use super::store::{PolicyStore, StoreError, migrator};
use super::violations::{StoredViolation, ViolationQuery, sql};
use ratelimitd_core::clock::Timestamp;

/// The notification channel every instance listens on.
pub(crate) const CHANNEL: &str = "ratelimitd_policy";

/// The policy database in PostgreSQL.
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
    // Set once the migrations have run on this pool.
    migrated: tokio::sync::OnceCell<()>,
}

impl PgStore {
    /// A store on `url` without connecting yet (only a malformed URL fails here); the first
    /// call that reaches the database migrates it (the migrator's advisory lock serialises
    /// instances).
    pub(crate) fn open(url: &str) -> Result<PgStore, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(2))
            .connect_lazy(url)?;
        Ok(PgStore {
            pool,
            migrated: tokio::sync::OnceCell::new(),
        })
    }

    /// The pool, once the schema is migrated (tried again on every call until it succeeds).
    pub(super) async fn ready(&self) -> Result<&PgPool, StoreError> {
        self.migrated
            .get_or_try_init(|| async { migrator().run(&self.pool).await })
            .await?;
        Ok(&self.pool)
    }

    pub(super) async fn notify(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(self.ready().await?)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl PolicyStore for PgStore {
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
        let sql = format!(
            "SELECT {COLUMNS} FROM rate_limit_overrides WHERE valid_until > $1 \
             ORDER BY created_at DESC, id DESC"
        );
        let rows = sqlx::query(&sql)
            .bind(micros(now))
            .fetch_all(self.ready().await?)
            .await?;
        rows.iter().map(read_override).collect()
    }

    async fn all_overrides(&self) -> Result<Vec<StoredOverride>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM rate_limit_overrides ORDER BY created_at DESC, id DESC");
        let rows = sqlx::query(&sql).fetch_all(self.ready().await?).await?;
        rows.iter().map(read_override).collect()
    }

    async fn count_active_overrides(&self, now: Timestamp) -> Result<u64, StoreError> {
        let mut b = override_sql::count_active::<Postgres>(now);
        let n: i64 = b
            .build_query_scalar()
            .fetch_one(self.ready().await?)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn overrides_page(&self, page: &OverridePage) -> Result<Vec<StoredOverride>, StoreError> {
        let mut b = override_sql::page::<Postgres>(page);
        let rows = b.build().fetch_all(self.ready().await?).await?;
        rows.iter().map(read_override).collect()
    }

    async fn delete_overrides_expired_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let mut b = override_sql::delete_expired::<Postgres>(before, batch);
        Ok(b.build()
            .execute(self.ready().await?)
            .await?
            .rows_affected())
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
        let rows = sqlx::query(
            "SELECT id, domain, descriptor, rate_limit, enabled FROM rate_limit_rules ORDER BY id",
        )
        .fetch_all(self.ready().await?)
        .await?;
        rows.iter().map(read_rule).collect()
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
        let mut q = sql::insert::<Postgres>(batch);
        Ok(q.build()
            .execute(self.ready().await?)
            .await?
            .rows_affected())
    }

    async fn violations(&self, q: &ViolationQuery) -> Result<Vec<StoredViolation>, StoreError> {
        let mut b = sql::select::<Postgres>(q);
        let rows = b.build().fetch_all(self.ready().await?).await?;
        rows.iter().map(sql::read).collect()
    }

    async fn delete_violations_before(
        &self,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let mut b = sql::delete_before::<Postgres>(before, batch);
        Ok(b.build()
            .execute(self.ready().await?)
            .await?
            .rows_affected())
    }
}

/// Listens on [`CHANNEL`] at `url` until `stop`, calling `changed` for every notification and
/// once after every (re)connection (a change may have been missed meanwhile). Reconnects after
/// 1 s, doubling up to 30 s, while the database is down.
pub(crate) async fn listen(
    url: String,
    changed: Arc<tokio::sync::Notify>,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut backoff = Duration::from_secs(1);
    loop {
        let result = tokio::select! {
            _ = &mut stop => return,
            r = session(&url, &changed) => r,
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, retry_in = ?backoff, "policy database notifications lost; reconnecting");
        }
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// One listening connection: returns only with the error that ended it.
async fn session(url: &str, changed: &tokio::sync::Notify) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen(CHANNEL).await?;
    changed.notify_one();
    loop {
        listener.recv().await?;
        changed.notify_one();
    }
}
