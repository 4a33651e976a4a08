//! The counters of priority shedding and soft limits: per limit and class, how many requests were
//! admitted, shed by their class's share, denied in the soft zone or denied past the limit; per
//! limit, how many answers carried the soft-breach signal. Classes come from the config (never
//! from request values) and the table is bounded by `STATS_MAX_KEYS` like the per-limit one, so
//! the cardinality stays bounded.
//!
//! Exposed as `ratelimitd_shed_total{key, class, outcome}` and
//! `ratelimitd_soft_breach_total{key}` (Prometheus), and as
//! `ratelimit.service.rate_limit.<KEY>[.<class>].<outcome>` and `<KEY>.soft_breach` (StatsD).

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, Opts};

use super::table::KeyTable;
use ratelimitd_core::limiter::ShedOutcome;

/// Separates a stats key from its class in the table's keys: stats keys are sanitised and
/// class names are letters, digits, `_` and `-`, so neither ever holds it.
const SEP: char = '|';
/// Index of the soft-breach counter, after the [`ShedOutcome`]s.
const BREACH: usize = ShedOutcome::ALL.len();

/// Per (limit, class) counters: one per [`ShedOutcome`], then the soft-breach count.
#[derive(Debug)]
pub(crate) struct ShedCounters {
    table: KeyTable<{ ShedOutcome::ALL.len() + 1 }>,
}

impl ShedCounters {
    /// Counters for at most `max_keys` (limit, class) pairs.
    pub(crate) fn new(max_keys: usize) -> ShedCounters {
        ShedCounters {
            table: KeyTable::new(max_keys),
        }
    }

    /// One request of class `class` (empty without classes) of limit `key` came to `outcome`.
    pub(crate) fn shed(&self, key: &str, class: &str, outcome: ShedOutcome) {
        let mut by = [0; ShedOutcome::ALL.len() + 1];
        by[outcome.index()] = 1;
        self.table.add(&format!("{key}{SEP}{class}"), by);
    }

    /// One answer of limit `key` carried the soft-breach signal.
    pub(crate) fn soft_breach(&self, key: &str) {
        let mut by = [0; ShedOutcome::ALL.len() + 1];
        by[BREACH] = 1;
        self.table.add(&format!("{key}{SEP}"), by);
    }

    /// Every counter that moved, as `(stats key, class, counter name, value)`.
    fn rows(&self) -> Vec<(String, String, &'static str, u64)> {
        let mut out = Vec::new();
        for (joined, values) in self.table.snapshot() {
            let (key, class) = joined.split_once(SEP).unwrap_or((&joined, ""));
            let names = ShedOutcome::ALL.iter().map(|o| o.as_str());
            for (name, v) in names.chain(["soft_breach"]).zip(values) {
                if v > 0 {
                    out.push((key.to_owned(), class.to_owned(), name, v));
                }
            }
        }
        out
    }

    /// The StatsD counters: `ratelimit.service.rate_limit.<KEY>[.<class>].<outcome>`.
    pub(crate) fn statsd(&self) -> Vec<(String, u64)> {
        self.rows()
            .into_iter()
            .map(|(key, class, name, v)| {
                let class = if class.is_empty() {
                    String::new()
                } else {
                    format!(".{class}")
                };
                (
                    format!("ratelimit.service.rate_limit.{key}{class}.{name}"),
                    v,
                )
            })
            .collect()
    }

    /// The Prometheus families, built at scrape time.
    pub(crate) fn families(&self) -> Vec<MetricFamily> {
        let shed = IntCounterVec::new(
            Opts::new(
                "ratelimitd_shed_total",
                "Requests of a limit with priorities or a soft zone, by class and outcome",
            ),
            &["key", "class", "outcome"],
        );
        let breach = IntCounterVec::new(
            Opts::new(
                "ratelimitd_soft_breach_total",
                "Answers that carried the soft-breach signal, by limit",
            ),
            &["key"],
        );
        let (Ok(shed), Ok(breach)) = (shed, breach) else {
            return Vec::new();
        };
        for (key, class, name, v) in self.rows() {
            if name == "soft_breach" {
                breach.with_label_values(&[key.as_str()]).inc_by(v);
            } else {
                shed.with_label_values(&[key.as_str(), class.as_str(), name])
                    .inc_by(v);
            }
        }
        let mut out = shed.collect();
        out.extend(breach.collect());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_limit_class_and_outcome() {
        let c = ShedCounters::new(100);
        c.shed("shop.service_api", "read", ShedOutcome::Shed);
        c.shed("shop.service_api", "read", ShedOutcome::Shed);
        c.shed("shop.service_api", "critical", ShedOutcome::Admitted);
        c.shed("soft.user", "", ShedOutcome::SoftDenied);
        c.soft_breach("soft.user");
        let mut names = c.statsd();
        names.sort();
        assert_eq!(
            names,
            [
                (
                    "ratelimit.service.rate_limit.shop.service_api.critical.admitted".into(),
                    1
                ),
                (
                    "ratelimit.service.rate_limit.shop.service_api.read.shed".into(),
                    2
                ),
                (
                    "ratelimit.service.rate_limit.soft.user.soft_breach".into(),
                    1
                ),
                (
                    "ratelimit.service.rate_limit.soft.user.soft_denied".into(),
                    1
                ),
            ]
        );
        let families = c.families();
        assert_eq!(families.len(), 2);
        assert_eq!(families[0].name(), "ratelimitd_shed_total");
        assert_eq!(families[0].get_metric().len(), 3);
    }
}
