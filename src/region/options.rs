//! The region options: the region this instance serves, the global store the regions share and
//! how often demand-following shares are synchronised through it. Read from `REGION`,
//! `GLOBAL_REDIS_*` and `REGION_SYNC_INTERVAL` by the settings.

use std::time::Duration;

use crate::store::redis::RedisSettings;

/// Where this instance runs among regions, and how it reaches the others.
#[derive(Debug, Clone)]
pub struct RegionSettings {
    /// `REGION`: `None` when unset (limits with `regions` are then refused at load).
    pub region: Option<String>,
    /// `GLOBAL_REDIS_*`: the global store, when `GLOBAL_REDIS_URL` is set.
    pub global: Option<RedisSettings>,
    /// `GLOBAL_REDIS_RESPONSE_TIMEOUT`: the longest one call to the global store may take (it is
    /// across regions, and never on the request path).
    pub global_response_timeout: Duration,
    /// `REGION_SYNC_INTERVAL`: how often each instance posts its demand and recomputes shares.
    pub sync_interval: Duration,
}
