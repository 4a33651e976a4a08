//! The usage of each limit with priority classes, a gauge (`ratelimitd_shed_usage_ratio{key}`)
//! and the console's "usage against each class threshold".
//!
//! Like the concurrency slots gauge (`metrics::slots`, whose table it reuses), it holds what the
//! store answered at this instance's latest decision on the limit
//! ([`ratelimitd_core::limiter::StatsSink::shed_usage`]): the counter after that decision (a refused
//! request counts nothing) and the limit it is a share of, until the window of that count ends.
//! No extra store call is made; on Redis the count includes every instance's hits as of this
//! instance's last call. Past the window's end the limit has no value (the series is left out):
//! the count says nothing of the new window. Keys are the limits' configured stats keys, labels
//! and classes come from the config, and the table is bounded by `STATS_MAX_KEYS`.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, Opts};

use super::slots::SlotGauges;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::Shedding;
use ratelimitd_core::limiter::ShedUsage;

/// One limit's latest usage.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// The counter after the decision.
    pub usage: u64,
    /// The limit the classes' shares are of.
    pub limit: u64,
    /// The limit's classes (and soft zone), from the config.
    pub shedding: Option<Arc<Shedding>>,
}

impl Usage {
    /// `usage / limit` (0 for a limit of 0).
    pub fn share(&self) -> f64 {
        if self.limit == 0 {
            0.0
        } else {
            self.usage as f64 / self.limit as f64
        }
    }
}

/// The latest usage of every limit with priority classes decided so far, bounded.
#[derive(Debug)]
pub struct UsageGauges(SlotGauges<Usage>);

impl UsageGauges {
    /// A table of at most `max_keys` limits.
    pub fn new(max_keys: usize) -> UsageGauges {
        UsageGauges(SlotGauges::new(max_keys))
    }

    /// Records one report.
    pub fn set(&self, u: &ShedUsage<'_>) {
        let usage = Usage {
            usage: u.usage,
            limit: u.limit,
            shedding: Some(u.shedding.clone()),
        };
        self.0.set(u.key, usage, u.until);
    }

    /// Reports dropped because the table was full.
    pub fn dropped(&self) -> u64 {
        self.0.dropped()
    }

    /// Every limit with its latest usage, and whether that usage is of the window in force at
    /// `now` (false: no decision since its window ended), sorted by key.
    pub fn snapshot(&self, now: Timestamp) -> Vec<(String, Usage, bool)> {
        (self.0.latest().into_iter())
            .map(|(key, usage, until)| (key, usage, until > now))
            .collect()
    }

    /// `ratelimitd_shed_usage_ratio{key}`: the share of each limit in use at this instance's
    /// latest decision on it, for the limits whose window of that decision is still in force.
    pub fn families(&self, now: Timestamp) -> Vec<MetricFamily> {
        let Ok(g) = GaugeVec::new(
            Opts::new(
                "ratelimitd_shed_usage_ratio",
                "Share of a limit with priority classes in use, as the store counted it at this instance's last decision on it (absent once that decision's window ended)",
            ),
            &["key"],
        ) else {
            return Vec::new();
        };
        for (key, usage, current) in self.snapshot(now) {
            if current {
                g.with_label_values(&[key.as_str()]).set(usage.share());
            }
        }
        g.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_usage_holds_until_its_window_ends() {
        let shedding = Arc::new(Shedding::default());
        let g = UsageGauges::new(10);
        let report = |usage, until| ShedUsage {
            key: "shop.service_api",
            usage,
            limit: 100,
            shedding: &shedding,
            until: Timestamp::from_secs(until),
        };
        g.set(&report(84, 60));
        g.set(&report(85, 60));
        let now = Timestamp::from_secs(59);
        let [(key, usage, current)] = &g.snapshot(now)[..] else {
            panic!("one limit");
        };
        assert_eq!(
            (key.as_str(), usage.usage, usage.limit, *current),
            ("shop.service_api", 85, 100, true)
        );
        let families = g.families(now);
        assert_eq!(families[0].get_metric()[0].get_gauge().get_value(), 0.85);
        // From the window's end on, the count is of a past window: no series.
        assert!(!g.snapshot(Timestamp::from_secs(60))[0].2);
        assert!(
            g.families(Timestamp::from_secs(60))[0]
                .get_metric()
                .is_empty()
        );
    }
}
