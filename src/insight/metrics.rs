//! The hot-key gauge, `ratelimitd_hot_key_hits{by,rank}`: the count of the Nth hottest key of
//! each ranking (`hits`, `denials`), read from the rankings at scrape time. Labels `by` and `rank`
//! only (at most 2 × [`HOT_KEY_RANKS`] series): a label carrying the key would grow without bound
//! under a key-cardinality attack, so the keys themselves are only at `/v1/hotkeys`.
//! `super::start` registers it with the stats.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts};

use super::hotkeys::{By, HotKeys};
use crate::metrics::Collect;

/// How many ranks of each hot-key ranking are exported as gauges.
pub(crate) const HOT_KEY_RANKS: usize = 10;

/// The gauge: (name, help).
const HOT_KEYS: (&str, &str) = (
    "ratelimitd_hot_key_hits",
    "Estimated hits (by=hits) or hits over the limit (by=denials) of the rank-th hottest key over the last minute; the keys are at /v1/hotkeys",
);

/// The hot-key rankings, as a gauge.
pub(super) struct HotKeyGauges(pub(super) Arc<HotKeys>);

impl Collect for HotKeyGauges {
    fn families(&self) -> Vec<MetricFamily> {
        let (name, help) = HOT_KEYS;
        let Ok(g) = IntGaugeVec::new(Opts::new(name, help), &["by", "rank"]) else {
            return Vec::new();
        };
        for by in By::ALL {
            let top = self.0.top(by, HOT_KEY_RANKS);
            for (rank, r) in top.iter().take(HOT_KEY_RANKS).enumerate() {
                let rank = (rank + 1).to_string();
                let count = i64::try_from(r.count).unwrap_or(i64::MAX);
                g.with_label_values(&[by.as_str(), rank.as_str()])
                    .set(count);
            }
        }
        g.collect()
    }
}
