//! The violation log's part of startup: its observer for the limiter, its writer and, with a
//! database, its retention task.

use std::sync::Arc;

use super::metrics::ViolationMetrics;
use super::{Pending, ViolationLog, ViolationOptions, writer};
use crate::background::Background;
use crate::metrics::Metrics;
use crate::policy::Policy;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::limiter::Observers;

/// What the violation log shares with the rest of the process.
#[derive(Debug)]
pub(crate) struct ViolationDeps<'a> {
    /// The policy database to write to, when it is on.
    pub policy: Option<&'a Arc<Policy>>,
    /// The stats its counters register with (`None` with `DISABLE_STATS`).
    pub metrics: &'a Option<Arc<Metrics>>,
    /// The clock of records and retention.
    pub clock: &'a Arc<dyn Clock>,
    /// Where the writer and retention tasks run.
    pub background: Background<'a>,
}

/// Starts the violation log and returns its observers for the limiter (none when
/// `VIOLATIONS_LOG=off`, or `db` without a database): its bounded map of pending records, the
/// writer draining it and, with a database, the retention task.
pub(crate) fn start(v: &ViolationOptions, deps: ViolationDeps<'_>) -> Observers {
    let ViolationDeps {
        policy,
        metrics,
        clock,
        background: mut bg,
    } = deps;
    // Registered also when the log is off: the two counters then read 0, as they always did.
    let metrics = metrics.as_ref().map(|m| {
        let counters = Arc::new(ViolationMetrics::default());
        m.register(counters.clone());
        counters
    });
    let mut observers = Observers::default();
    let db = match policy {
        Some(p) if v.sinks.db() => Some(p.store().clone()),
        _ => None,
    };
    if db.is_none() && !v.sinks.json() {
        tracing::info!(sinks = ?v.sinks, "violation log off (no policy database to write to)");
        return observers;
    }
    let pending = Arc::new(Pending::new(v.queue_size));
    let instance: Arc<str> = instance_name(v).into();
    let log = ViolationLog::new(pending.clone(), instance, metrics.clone());
    observers.push(Arc::new(log));
    if let Some(db) = &db
        && v.retention_days > 0
    {
        let (days, every) = (v.retention_days, v.retention_interval);
        let task = writer::retention(db.clone(), clock.clone(), days, every, bg.stopped());
        bg.spawn(task);
    }
    let sinks = writer::Sinks {
        db,
        json: v.sinks.json(),
        metrics: metrics.clone(),
    };
    let batching = writer::Batching {
        size: v.batch_size,
        delay: v.batch_delay,
    };
    let run = writer::run(pending, clock.clone(), sinks, batching, bg.stopped());
    bg.spawn(run);
    observers
}

/// The instance's name in violation records and on the console: `INSTANCE_ID`, else
/// this host's name.
pub(crate) fn instance_name(v: &ViolationOptions) -> String {
    v.instance_id.clone().unwrap_or_else(host_name)
}

/// This host's name (`HOSTNAME`, else the kernel's).
fn host_name() -> String {
    let kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    std::env::var("HOSTNAME")
        .ok()
        .or_else(kernel)
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ratelimitd".to_string())
}
