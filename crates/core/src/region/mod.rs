//! Global limits split across regions. A limit with `regions` is a worldwide budget: each region
//! runs its own store and enforces its share of the budget there, so a decision never leaves the
//! region. [`Regions`] is what the configuration declares (the shares per region and what a
//! region not listed gets); [`share`] holds the arithmetic — the effective limit a region
//! enforces, shares that follow demand with a floor, and the bounds on what the world admits —
//! and [`RegionShares`] is what the limiter asks, per op, for the share of the region it runs in.

pub mod share;

use std::collections::BTreeMap;

use crate::config::Limit;

/// A limit's `regions`: its per-region shares of the configured (global) limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Regions {
    /// The YAML path of the `regions` map, for errors found once the region is known (startup).
    pub path: String,
    /// Region name → its share of the limit (above 0; together at most 1).
    pub shares: BTreeMap<String, f64>,
    /// `default_share`, else what the listed regions leave (`1 − Σ shares`; may be 0): the share
    /// of a region that is not listed.
    pub default_share: f64,
}

impl Regions {
    /// The share of `region`: its own when listed, else the default.
    pub fn share_of(&self, region: &str) -> f64 {
        self.shares
            .get(region)
            .copied()
            .unwrap_or(self.default_share)
    }
}

/// The region this process serves, asked by the limiter for the share of each regional limit.
/// Without a region (the default), no limit is scaled.
#[derive(Debug, Default)]
pub struct RegionShares {
    region: Option<String>,
}

impl RegionShares {
    /// Shares for the instances of `region`.
    pub fn new(region: impl Into<String>) -> RegionShares {
        RegionShares {
            region: Some(region.into()),
        }
    }

    /// The region, when one is set.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// This region's share of `limit`; `None` when the limit is global or no region is set.
    pub fn share(&self, limit: &Limit) -> Option<f64> {
        let region = self.region.as_deref()?;
        limit.regions.as_ref().map(|r| r.share_of(region))
    }
}
