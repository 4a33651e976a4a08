//! Global limits split across regions. A limit with `regions` is a worldwide budget: each region
//! runs its own store and enforces its share of the budget there, so a decision never leaves the
//! region. [`Regions`] is what the configuration declares (the shares per region and what a
//! region not listed gets); [`share`] holds the arithmetic — the effective limit a region
//! enforces, shares that follow demand with a floor, and the bounds on what the world admits —
//! and [`RegionShares`] is what the limiter asks, per op, for the share of the region it runs in.

pub mod share;
pub mod table;

pub use table::{DemandRound, RegionShares};

use std::collections::BTreeMap;

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
    /// `follow_demand`: the shares follow each region's demand, every key starting at the floor
    /// (the listed shares then only name the regions).
    pub follow: Option<FollowDemand>,
}

/// How demand-following shares move ([`share::demand_shares`], [`share::step_own`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FollowDemand {
    /// `floor`: the least share a listed region keeps, however idle (at most 1 / regions).
    pub floor: f64,
    /// `max_step`: the most of the budget one sync moves between regions (bounds over-admission).
    pub max_step: f64,
}

impl FollowDemand {
    /// The defaults of `follow_demand: true`.
    pub const DEFAULT: FollowDemand = FollowDemand {
        floor: 0.05,
        max_step: 0.1,
    };
}

impl Regions {
    /// The share of `region`: its own when listed, else the default.
    pub fn share_of(&self, region: &str) -> f64 {
        self.shares
            .get(region)
            .copied()
            .unwrap_or(self.default_share)
    }

    /// Where `region` sits among the listed regions (by name: the order of a sync's demands).
    pub fn index_of(&self, region: &str) -> Option<usize> {
        self.shares.keys().position(|r| r == region)
    }
}
