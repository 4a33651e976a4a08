//! The violation log's background side: [`run`] drains the observer's queue in batches (up to
//! `VIOLATIONS_BATCH_SIZE` records, or whatever arrived within `VIOLATIONS_BATCH_DELAY`) into the
//! database in one multi-row statement and/or as JSON lines; [`retention`] deletes old rows.
//! A batch the database refuses is dropped and counted, never retried: memory stays bounded by
//! the queue whatever the database does.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{StoredViolation, Violation};
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::policy::PolicyStore;

/// Where [`run`] writes.
#[derive(Debug, Clone)]
pub struct Sinks {
    /// The database, when records go there.
    pub db: Option<Arc<dyn PolicyStore>>,
    /// True to print one JSON line per record on standard error.
    pub json: bool,
    /// Counts written and dropped records (none with `DISABLE_STATS`).
    pub metrics: Option<Arc<Metrics>>,
}

/// Batches of `size` records at most, each waiting at most `delay` for the batch to fill.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Records per batch.
    pub size: usize,
    /// The longest the first record of a batch waits.
    pub delay: Duration,
}

/// Writes the records of `queue` until `stop`, then writes what is already queued and returns.
pub async fn run(
    mut queue: mpsc::Receiver<Violation>,
    sinks: Sinks,
    batching: Batching,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut batch = Vec::with_capacity(batching.size);
    let mut db_failing = false;
    loop {
        batch.clear();
        tokio::select! {
            _ = &mut stop => break,
            n = queue.recv_many(&mut batch, batching.size) => if n == 0 { return },
        }
        let fill = tokio::time::sleep(batching.delay);
        tokio::pin!(fill);
        while batch.len() < batching.size {
            let room = batching.size - batch.len();
            tokio::select! {
                _ = &mut fill => break,
                n = queue.recv_many(&mut batch, room) => if n == 0 { break },
            }
        }
        write(&mut batch, &sinks, &mut db_failing).await;
    }
    // Shutting down: what is queued now, in batches (bounded by the queue's capacity).
    loop {
        batch.clear();
        while batch.len() < batching.size {
            match queue.try_recv() {
                Ok(v) => batch.push(v),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            return;
        }
        write(&mut batch, &sinks, &mut db_failing).await;
    }
}

/// Writes one batch to every sink; logs the first failure of a run of failed batches only.
async fn write(batch: &mut Vec<Violation>, sinks: &Sinks, db_failing: &mut bool) {
    let stored: Vec<StoredViolation> = batch
        .drain(..)
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
        m.violations_written(written);
        m.violations_dropped(dropped);
    }
}

/// Rows deleted per statement, and statements per round at most (so one round is bounded).
const DELETE_BATCH: u32 = 1000;
const MAX_DELETES_PER_ROUND: usize = 1000;

/// Every `interval` until `stop`, deletes the records older than `days` by `clock`, in batches.
pub async fn retention(
    db: Arc<dyn PolicyStore>,
    clock: Arc<dyn Clock>,
    (days, interval): (u32, Duration),
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let keep = Duration::from_secs(u64::from(days) * 86_400);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let now = clock.now();
        let Some(before) = now.as_micros().checked_sub(keep.as_micros() as u64) else {
            continue;
        };
        let before = crate::clock::Timestamp::from_micros(before);
        let mut deleted = 0;
        for _ in 0..MAX_DELETES_PER_ROUND {
            match db.delete_violations_before(before, DELETE_BATCH).await {
                Ok(n) => {
                    deleted += n;
                    if n < u64::from(DELETE_BATCH) {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "violation log: retention delete failed; next round retries");
                    break;
                }
            }
        }
        if deleted > 0 {
            tracing::info!(deleted, days, "violation log: old records deleted");
        }
    }
}
