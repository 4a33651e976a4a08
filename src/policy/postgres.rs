//! The fleet backend: PostgreSQL (`POLICY_DB_URL`) through sqlx, shared by every instance and
//! migrated by the same migrations as SQLite. Every rule or override write is followed by a
//! `pg_notify` on [`CHANNEL`], so the other instances re-read at once ([`listen`]).
//!
//! The pool connects lazily and the migrations run on the first call that reaches the database:
//! a database that is down when ratelimitd starts does not stop it (files serve at once, the API
//! answers 503) and is picked up when it answers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgArguments, PgListener, PgPool, PgPoolOptions, PgQueryResult};
use sqlx::query::Query;
use sqlx::{Postgres, QueryBuilder, Transaction};

use super::backend::SqlBackend;
use super::store::{StoreError, migrator};

/// The notification channel every instance listens on.
pub(crate) const CHANNEL: &str = "ratelimitd_policy";

/// The advisory lock key that serialises history writers across instances.
const HISTORY_LOCK: i64 = 0x7261_7465_6869_7374; // "ratehist"

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
}

#[async_trait]
impl SqlBackend for PgStore {
    type Db = Postgres;

    /// The pool, once the schema is migrated (tried again on every call until it succeeds).
    async fn pool(&self) -> Result<&PgPool, StoreError> {
        self.migrated
            .get_or_try_init(|| async { migrator().run(&self.pool).await })
            .await?;
        Ok(&self.pool)
    }

    /// A transaction holding the history writers' advisory lock until it ends: the instances
    /// share the database, and the policy's own write lock serialises only one instance's writers.
    async fn begin(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        let mut tx = self.pool().await?.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(HISTORY_LOCK)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// Notifies [`CHANNEL`], so the other instances re-read at once ([`listen`]).
    async fn changed(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(self.pool().await?)
            .await?;
        Ok(())
    }

    fn query<'s, 'a: 's>(
        b: &'s mut QueryBuilder<'a, Postgres>,
    ) -> Query<'s, Postgres, PgArguments> {
        b.build()
    }

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
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
