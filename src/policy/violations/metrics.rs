//! The violation log's counters: `ratelimitd_violations_dropped_total` (records dropped: the
//! queue was full or their batch failed to write) and `ratelimitd_violations_written_total`.
//! [`super::start`] registers them with the stats, also when the log is off (both then read 0).

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus::proto::MetricFamily;

use crate::metrics::{Collect, counter};

/// Records dropped and written so far.
#[derive(Debug, Default)]
pub(crate) struct ViolationMetrics {
    dropped: AtomicU64,
    written: AtomicU64,
}

impl ViolationMetrics {
    /// `n` violation records were dropped.
    pub(crate) fn dropped(&self, n: u64) {
        if n > 0 {
            self.dropped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// `n` violation records were written.
    pub(crate) fn written(&self, n: u64) {
        if n > 0 {
            self.written.fetch_add(n, Ordering::Relaxed);
        }
    }
}

impl Collect for ViolationMetrics {
    fn families(&self) -> Vec<MetricFamily> {
        let mut out = counter(
            "ratelimitd_violations_dropped_total",
            "Violation records dropped: the queue was full or their batch failed to write",
            self.dropped.load(Ordering::Relaxed),
        );
        out.extend(counter(
            "ratelimitd_violations_written_total",
            "Violation records written to the database and/or the JSON log",
            self.written.load(Ordering::Relaxed),
        ));
        out
    }
}
