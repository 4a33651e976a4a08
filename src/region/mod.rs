//! Limits shared by regions (`rate_limit.regions`): each region enforces its share of a worldwide
//! limit on its own store, so no decision crosses regions (the arithmetic and the per-request
//! scaling are the core's: [`share`], [`RegionShares`]). This module is the server's side:
//! - [`RegionCheck`]: limits with `regions` are refused at load unless `REGION` gives them a share;
//! - [`RegionSync`]: with `follow_demand`, the shares move with each region's demand, exchanged
//!   through the global store (`GLOBAL_REDIS_*`) every `REGION_SYNC_INTERVAL`;
//! - [`start`] wires both from the settings; [`Regional::describe`] is the `/rlconfig` and status
//!   lines, [`Regional::gauges`] the metrics.

mod check;
mod engage;
mod members;
mod metrics;
mod options;
#[cfg(test)]
mod sim_tests;
mod sync;
mod view;
mod wiring;

pub use check::RegionCheck;
pub use metrics::LiveConfig;
pub use options::RegionSettings;
pub use ratelimitd_core::region::{DemandRound, FollowDemand, RegionShares, Regions, share, table};
pub use sync::{BREAKER_TARGET, ENTRY_INTERVALS, LEASE_INTERVALS, RegionSync, SyncStatus};
pub use view::ShareGauge;
pub use wiring::{RegionDeps, Regional, start};
