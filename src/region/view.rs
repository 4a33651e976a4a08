//! What an operator sees of the regions: per regional limit, this region's share (the listed one,
//! or with `follow_demand` the mean of the shares in force over the keys active here and how
//! many there are, the floor without any), and how the
//! sync with the global store goes (with its breaker's state). `/rlconfig` and the status page print [`Regional::describe`];
//! the metrics (`super::metrics`) export [`Regional::gauges`].

use std::collections::HashMap;
use std::time::Duration;

use super::Regional;
use ratelimitd_core::config::RateLimitConfig;
use ratelimitd_core::resilience::BreakerState;

/// This region's share of one limit.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareGauge {
    /// The region.
    pub region: String,
    /// The limit's `full_key`.
    pub limit: String,
    /// The share in force (the mean over its active keys for `follow_demand`; the floor without
    /// any).
    pub share: f64,
    /// Active keys with a share of their own (`follow_demand`; 0 otherwise).
    pub keys: usize,
}

impl Regional {
    /// This region's share of every regional limit of `config` (none without `REGION`).
    pub fn gauges(&self, config: &RateLimitConfig) -> Vec<ShareGauge> {
        let Some(region) = self.shares.region() else {
            return Vec::new();
        };
        let mut moving: HashMap<String, (f64, usize)> = HashMap::new();
        for (_, limit, share) in self.shares.current(self.clock.now()) {
            let e = moving.entry(limit).or_default();
            e.0 += share;
            e.1 += 1;
        }
        let limits = config.limits().into_iter();
        limits
            .filter_map(|l| {
                let regions = l.regions.as_ref()?;
                // Without active keys: the share a key starts at (a demand-following one, its
                // floor).
                let start = regions
                    .follow
                    .map_or_else(|| regions.share_of(region), |f| f.floor);
                let (share, keys) = match moving.get(&l.full_key) {
                    Some((sum, n)) => (sum / *n as f64, *n),
                    None => (start, 0),
                };
                Some(ShareGauge {
                    region: region.to_string(),
                    limit: l.full_key.clone(),
                    share,
                    keys,
                })
            })
            .collect()
    }

    /// The lines an operator reads: the region, each regional limit's share, the sync's state.
    pub fn describe(&self, config: Option<&RateLimitConfig>) -> Vec<String> {
        let Some(region) = self.shares.region() else {
            return Vec::new();
        };
        let mut out = vec![format!("region: {region}")];
        for g in config.map(|c| self.gauges(c)).unwrap_or_default() {
            let keys = if g.keys > 0 {
                format!(" (mean over {} active keys)", g.keys)
            } else {
                String::new()
            };
            out.push(format!(
                "region_share: {} {}={:.4}{keys}",
                g.limit, g.region, g.share
            ));
        }
        if let Some(sync) = &self.sync {
            let s = sync.status();
            let age = sync
                .age()
                .map_or("never".to_string(), |a| format!("{:.1}s ago", secs(a)));
            let state = if s.failing { "failing" } else { "ok" };
            let mut line = format!(
                "region_sync: {state}, last success {age}, {} keys ({} on the board), {} failed rounds",
                s.keys, s.on_board, s.failures
            );
            for b in sync.breaker_reports() {
                let breaker = match b.state {
                    BreakerState::Closed => "closed",
                    BreakerState::HalfOpen => "half-open",
                    BreakerState::Open => "open",
                };
                line.push_str(&format!(", breaker {breaker}"));
            }
            if let (true, Some(e)) = (s.failing, &s.last_error) {
                line.push_str(&format!(", last error: {e}"));
            }
            out.push(line);
        }
        out
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
