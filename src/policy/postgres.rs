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
    async fn ready(&self) -> Result<&PgPool, StoreError> {
        self.migrated
            .get_or_try_init(|| async { migrator().run(&self.pool).await })
            .await?;
        Ok(&self.pool)
    }

    async fn notify(&self) -> Result<(), StoreError> {
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
        who: &str,
        now: Timestamp,
    ) -> Result<StoredOverride, StoreError> {
        sqlx::query(&format!(
            "INSERT INTO rate_limit_overrides ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ))
        .bind(id)
        .bind(&o.domain)
        .bind(serde_json::to_string(&o.descriptor).unwrap_or_default())
        .bind(i64::from(o.requests_per_unit))
        .bind(o.unit.as_str())
        .bind(micros(o.valid_until))
        .bind(&o.reason)
        .bind(who)
        .bind(micros(now))
        .execute(self.ready().await?)
        .await?;
        self.notify().await?;
        Ok(StoredOverride {
            id: id.to_string(),
            spec: o.clone(),
            created_by: who.to_string(),
            created_at: now,
        })
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

    async fn delete_override(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM rate_limit_overrides WHERE id = $1")
            .bind(id)
            .execute(self.ready().await?)
            .await?;
        self.notify().await?;
        Ok(done.rows_affected() > 0)
    }

    async fn put_rule(&self, rule: &Rule, who: &str, now: Timestamp) -> Result<(), StoreError> {
        let rl = &rule.rate_limit;
        let text = |k: &str| rl.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let int = |k: &str| rl.get(k).and_then(serde_json::Value::as_i64);
        sqlx::query(
            "INSERT INTO rate_limit_rules (id, domain, descriptor, algorithm, requests_per_unit, \
             unit, unit_multiplier, burst, enabled, created_by, created_at, updated_at, rate_limit) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12) \
             ON CONFLICT (id) DO UPDATE SET domain = excluded.domain, \
             descriptor = excluded.descriptor, algorithm = excluded.algorithm, \
             requests_per_unit = excluded.requests_per_unit, unit = excluded.unit, \
             unit_multiplier = excluded.unit_multiplier, burst = excluded.burst, \
             enabled = excluded.enabled, created_by = excluded.created_by, \
             updated_at = excluded.updated_at, rate_limit = excluded.rate_limit",
        )
        .bind(&rule.id)
        .bind(&rule.domain)
        .bind(serde_json::to_string(&rule.descriptor).unwrap_or_default())
        .bind(Some(text("algorithm")).filter(|a| !a.is_empty()).unwrap_or("fixed_window".into()))
        .bind(int("requests_per_unit").unwrap_or(0))
        .bind(text("unit"))
        .bind(int("unit_multiplier").unwrap_or(1))
        .bind(int("burst"))
        .bind(rule.enabled)
        .bind(who)
        .bind(micros(now))
        .bind(serde_json::Value::Object(rule.rate_limit.clone()).to_string())
        .execute(self.ready().await?)
        .await?;
        self.notify().await
    }

    async fn rules(&self) -> Result<Vec<Rule>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, domain, descriptor, rate_limit, enabled FROM rate_limit_rules ORDER BY id",
        )
        .fetch_all(self.ready().await?)
        .await?;
        rows.iter().map(read_rule).collect()
    }

    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM rate_limit_rules WHERE id = $1")
            .bind(id)
            .execute(self.ready().await?)
            .await?;
        self.notify().await?;
        Ok(done.rows_affected() > 0)
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
