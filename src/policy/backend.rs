//! What the two SQL backends do differently, and nothing more: where a ready pool comes from
//! (SQLite migrates at open, PostgreSQL on the first call that reaches it), how a write
//! transaction is serialised against the other writers (SQLite's `BEGIN IMMEDIATE`,
//! PostgreSQL's advisory lock across instances), and who is told about a committed change
//! (PostgreSQL's other instances). The SQL, the audited transactions and the whole
//! [`super::PolicyStore`] are written once over this trait (`sql_store`), so a fix to one backend's
//! logic cannot miss the other.

use async_trait::async_trait;
use sqlx::query::Query;
use sqlx::{Database, Pool, QueryBuilder, Transaction};

use super::store::StoreError;

/// A SQL database the policy store runs on.
#[async_trait]
pub(super) trait SqlBackend: Send + Sync + std::fmt::Debug + 'static {
    /// The sqlx driver.
    type Db: Database;

    /// The pool, with the schema migrated.
    async fn pool(&self) -> Result<&Pool<Self::Db>, StoreError>;

    /// A transaction for a rule or override write with its history row, serialised against every
    /// other such writer so that two history rows never claim the same number.
    async fn begin(&self) -> Result<Transaction<'static, Self::Db>, StoreError>;

    /// Tells whoever else reads this database that rules or overrides changed.
    async fn changed(&self) -> Result<(), StoreError>;

    /// `b`'s statement, to run. Each driver's arguments are covariant in the lifetime of the
    /// values they bind, which generic code cannot see; this lets the statement borrow `b` for
    /// less than those values live (else `b` would stay borrowed until it is dropped).
    fn query<'s, 'a: 's>(
        b: &'s mut QueryBuilder<'a, Self::Db>,
    ) -> Query<'s, Self::Db, <Self::Db as Database>::Arguments<'s>>;

    /// How many rows a statement changed (each driver has its own result type).
    fn rows_affected(done: &<Self::Db as Database>::QueryResult) -> u64;

    /// Commits a rule or override write, then tells the others ([`SqlBackend::changed`]).
    async fn commit_change(&self, tx: Transaction<'static, Self::Db>) -> Result<(), StoreError> {
        tx.commit().await?;
        self.changed().await
    }
}
