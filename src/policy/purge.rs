//! Deleting old rows on the service clock, in bounded batches: the violation log's retention and
//! the purge of overrides that expired longer than `POLICY_EXPIRED_RETENTION` ago share
//! [`retention_round`] and [`retention_loop`].

use std::sync::Arc;
use std::time::Duration;

use super::store::{PolicyStore, StoreError};
use ratelimitd_core::clock::{Clock, Timestamp};

/// Rows deleted per statement, and statements per round at most (so one round is bounded).
const DELETE_BATCH: u32 = 1000;
const MAX_DELETES_PER_ROUND: usize = 1000;

/// Which rows a retention task deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    /// Violation records older than the retention.
    Violations,
    /// Overrides whose `valid_until` passed longer than the retention ago.
    ExpiredOverrides,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Violations => "violation log",
            Table::ExpiredOverrides => "expired overrides",
        }
    }

    async fn delete(
        self,
        db: &dyn PolicyStore,
        before: Timestamp,
        batch: u32,
    ) -> Result<u64, StoreError> {
        match self {
            Table::Violations => db.delete_violations_before(before, batch).await,
            Table::ExpiredOverrides => db.delete_overrides_expired_before(before, batch).await,
        }
    }
}

/// One round: deletes the rows of `table` older than `keep` before `clock`'s now, in batches;
/// returns how many.
pub(crate) async fn retention_round(
    db: &dyn PolicyStore,
    clock: &dyn Clock,
    table: Table,
    keep: Duration,
) -> Result<u64, StoreError> {
    let now = clock.now();
    let Some(before) = now.as_micros().checked_sub(keep.as_micros() as u64) else {
        return Ok(0);
    };
    let before = Timestamp::from_micros(before);
    let mut deleted = 0;
    for _ in 0..MAX_DELETES_PER_ROUND {
        let n = table.delete(db, before, DELETE_BATCH).await?;
        deleted += n;
        if n < u64::from(DELETE_BATCH) {
            break;
        }
    }
    Ok(deleted)
}

/// What a retention loop deletes: the rows of `table` older than `keep`, looked for every
/// `interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retention {
    /// The table.
    pub table: Table,
    /// How long a row is kept.
    pub keep: Duration,
    /// How often old rows are looked for.
    pub interval: Duration,
}

/// Every `retention.interval` until `stop`, one [`retention_round`] (a failure is logged; the
/// next round retries).
pub(crate) async fn retention_loop(
    db: Arc<dyn PolicyStore>,
    clock: Arc<dyn Clock>,
    retention: Retention,
    stop: impl Future<Output = ()>,
) {
    let Retention {
        table,
        keep,
        interval,
    } = retention;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(interval) => {}
        }
        match retention_round(&*db, &*clock, table, keep).await {
            Ok(0) => {}
            Ok(deleted) => {
                let keep_secs = keep.as_secs();
                tracing::info!(deleted, keep_secs, "{}: old rows deleted", table.name());
            }
            Err(StoreError::NotOpen { .. }) => {}
            Err(e) => {
                tracing::warn!(error = %e, "{}: retention delete failed; next round retries", table.name());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::{NewOverride, PathEntry};
    use crate::policy::sqlite::SqliteStore;
    use ratelimitd_core::clock::ManualClock;
    use ratelimitd_core::config::Unit;

    fn spec(until: u64) -> NewOverride {
        NewOverride {
            domain: "api".into(),
            descriptor: vec![PathEntry {
                key: "client_key".into(),
                value: "a".into(),
            }],
            requests_per_unit: 1,
            unit: Unit::Minute,
            valid_until: Timestamp::from_secs(until),
            reason: String::new(),
        }
    }

    #[tokio::test]
    async fn expired_overrides_go_once_the_retention_passed_on_the_service_clock() {
        let dir = tempfile::tempdir().unwrap();
        let db = SqliteStore::open(dir.path()).await.unwrap();
        let t = Timestamp::from_secs(100);
        for (id, until) in [("ov_a", 200), ("ov_b", 1_000), ("ov_c", 5_000)] {
            db.insert_override(
                id,
                &spec(until),
                &crate::policy::history::Audit::new("ops", ""),
                t,
            )
            .await
            .unwrap();
        }
        let clock = ManualClock::new(Timestamp::from_secs(500));
        let keep = Duration::from_secs(600);
        let table = Table::ExpiredOverrides;
        // ov_a expired at 200, but 500 - 600 is before the epoch: nothing is old enough.
        assert_eq!(retention_round(&db, &clock, table, keep).await.unwrap(), 0);
        clock.set(Timestamp::from_secs(800));
        let n = retention_round(&db, &clock, table, keep).await.unwrap();
        assert_eq!(n, 0, "ov_a expired 600 s ago, not more");
        clock.set(Timestamp::from_secs(801));
        assert_eq!(retention_round(&db, &clock, table, keep).await.unwrap(), 1);
        clock.set(Timestamp::from_secs(4_000));
        assert_eq!(retention_round(&db, &clock, table, keep).await.unwrap(), 1);
        let left: Vec<_> = db.all_overrides().await.unwrap();
        assert_eq!(
            left.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(),
            ["ov_c"]
        );
    }
}
