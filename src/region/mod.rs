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
mod sync;
#[cfg(test)]
mod tests;
mod view;
mod wiring;

pub(crate) use check::RegionCheck;
pub(crate) use metrics::LiveConfig;
pub(crate) use options::RegionSettings;
pub use sync::LEASE_INTERVALS;
pub(crate) use sync::{BREAKER_TARGET, RegionSync};
pub(crate) use wiring::{RegionDeps, Regional, start};
