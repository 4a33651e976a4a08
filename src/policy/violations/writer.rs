//! The violation log's background side: [`run`] takes the whole [`Pending`] map every
//! `VIOLATIONS_BATCH_DELAY` and writes its records (one per key, with their request counts) to
//! the database in multi-row statements of up to `VIOLATIONS_BATCH_SIZE` rows and/or as JSON
//! lines; [`retention`] deletes old rows. A batch the database refuses is dropped and counted,
//! never retried: memory stays bounded by the map whatever the database does.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use super::metrics::ViolationMetrics;
use super::{Pending, StoredViolation, Violation};
use crate::policy::PolicyStore;
use crate::policy::purge::{Retention, Table, retention_loop};
use ratelimitd_core::clock::Clock;

/// Where [`run`] writes.
#[derive(Debug, Clone)]
pub(crate) struct Sinks {
    /// The database, when records go there.
    pub db: Option<Arc<dyn PolicyStore>>,
    /// True to print one JSON line per record on standard error.
    pub json: bool,
    /// Counts written and dropped records (none with `DISABLE_STATS`).
    pub metrics: Option<Arc<ViolationMetrics>>,
}

/// Rows of `size` per statement at most, the map taken every `delay`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batching {
    /// Rows per statement.
    pub size: usize,
    /// How often the pending records are written.
    pub delay: Duration,
}

/// Writes the records of `pending` until `stop`, then writes what is still pending and returns.
/// The delay is measured on `clock` too (checked every `delay`): with the manual clock of tests,
/// records wait until the test moves time on, so what they aggregate does not depend on timing.
pub(crate) async fn run(
    pending: Arc<Pending>,
    clock: Arc<dyn Clock>,
    sinks: Sinks,
    batching: Batching,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut db_failing = false;
    let mut last = clock.now();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(batching.delay) => {}
        }
        let now = clock.now();
        // Half the delay absorbs a system clock running a little behind the timer.
        let due = last.saturating_add(batching.delay / 2);
        if now >= last && now < due {
            continue;
        }
        last = now;
        flush(&pending, &sinks, batching.size, &mut db_failing).await;
    }
    // Shutting down: what is pending now (bounded by the map's capacity).
    flush(&pending, &sinks, batching.size, &mut db_failing).await;
}

/// Takes every pending record and writes them in statements of `size` rows.
async fn flush(pending: &Pending, sinks: &Sinks, size: usize, db_failing: &mut bool) {
    let mut records = pending.take().into_iter();
    loop {
        let batch: Vec<Violation> = records.by_ref().take(size).collect();
        if batch.is_empty() {
            return;
        }
        write(batch, sinks, db_failing).await;
    }
}

/// Writes one batch to every sink; logs the first failure of a run of failed batches only.
async fn write(batch: Vec<Violation>, sinks: &Sinks, db_failing: &mut bool) {
    let stored: Vec<StoredViolation> = batch
        .into_iter()
        .map(|violation| StoredViolation {
            id: format!("vi_{:016x}", fastrand::u64(..)),
            violation,
        })
        .collect();
    if sinks.json {
        let mut lines = Vec::new();
        for s in &stored {
            let _ = writeln!(lines, "{}", s.to_json());
        }
        // One write per batch: lines are not interleaved with log lines.
        let _ = std::io::stderr().lock().write_all(&lines);
    }
    let Some(db) = &sinks.db else {
        count(sinks, stored.len() as u64, 0);
        return;
    };
    match db.insert_violations(&stored).await {
        Ok(_) => {
            if std::mem::take(db_failing) {
                tracing::info!("violation log: the database accepts records again");
            }
            count(sinks, stored.len() as u64, 0);
        }
        Err(e) => {
            if !std::mem::replace(db_failing, true) {
                tracing::warn!(error = %e, "violation log: database write failed; dropping batches until it answers");
            }
            count(sinks, 0, stored.len() as u64);
        }
    }
}

fn count(sinks: &Sinks, written: u64, dropped: u64) {
    if let Some(m) = &sinks.metrics {
        m.written(written);
        m.dropped(dropped);
    }
}

/// Every `interval` until `stop`, deletes the records older than `days` by `clock`, in batches.
pub(crate) async fn retention(
    db: Arc<dyn PolicyStore>,
    clock: Arc<dyn Clock>,
    days: u32,
    interval: Duration,
    stop: impl Future<Output = ()>,
) {
    let every = Retention {
        table: Table::Violations,
        keep: Duration::from_secs(u64::from(days) * 86_400),
        interval,
    };
    retention_loop(db, clock, every, stop).await;
}
