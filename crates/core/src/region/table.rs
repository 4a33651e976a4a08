//! [`RegionShares`]: what the limiter asks, per op of a regional limit, for this region's share.
//! Static shares come straight from the limit's [`Regions`]; demand-following ones are kept per
//! active key (the cache key of one descriptor's counter), together with the hits seen since the
//! last sync, which the sync task ([`RegionShares::take_round`]) turns into this instance's
//! demand and answers with the key's new share ([`RegionShares::apply`]).
//!
//! A key new to this region starts at the limit's floor once the region has reached the global
//! store ([`RegionShares::mark_synced`]): the others may already hold the rest, and the floor is
//! what every region is always left. Before that (a region that starts cut off), it starts at the
//! listed share. Keys are bounded: past [`RegionShares::with_max_keys`] a new key keeps its
//! starting share and is not synced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::Regions;
use crate::config::Limit;

/// Keys tracked by default.
const MAX_KEYS: usize = 100_000;

/// Rounds a key may stay idle before it is forgotten (its share goes back to the listed one).
pub const IDLE_ROUNDS: u32 = 30;

/// One demand-following key.
#[derive(Debug)]
struct Tracked {
    /// The limit's `full_key`, for listings per limit.
    limit: String,
    regions: Arc<Regions>,
    /// Hits seen since the last round.
    hits: u64,
    /// This region's share in force.
    share: f64,
    /// Rounds in a row without hits.
    idle: u32,
}

/// One key's turn in a sync round.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandRound {
    /// The cache key.
    pub key: String,
    /// The limit's regions.
    pub regions: Arc<Regions>,
    /// Hits this instance saw since the previous round.
    pub hits: u64,
    /// This region's share in force.
    pub share: f64,
}

/// The region this process serves and its demand-following shares.
#[derive(Debug, Default)]
pub struct RegionShares {
    region: Option<String>,
    tracked: Mutex<HashMap<String, Tracked>>,
    max_keys: usize,
    synced: AtomicBool,
}

impl RegionShares {
    /// Shares for the instances of `region`.
    pub fn new(region: impl Into<String>) -> RegionShares {
        RegionShares {
            region: Some(region.into()),
            tracked: Mutex::default(),
            max_keys: MAX_KEYS,
            synced: AtomicBool::new(false),
        }
    }

    /// The same, tracking at most `max_keys` demand-following keys.
    pub fn with_max_keys(mut self, max_keys: usize) -> RegionShares {
        self.max_keys = max_keys;
        self
    }

    /// The global store answered a sync round: keys new to this region start at the floor.
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// The region, when one is set.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// This region's share of `limit` for the counter `key` that `hits` are about to be counted
    /// on; `None` when the limit is global or no region is set. A demand-following limit's hits
    /// are recorded for the next sync.
    pub fn share(&self, limit: &Limit, key: &str, hits: u64) -> Option<f64> {
        let region = self.region.as_deref()?;
        let regions = limit.regions.as_ref()?;
        let Some(follow) = regions.follow else {
            return Some(regions.share_of(region));
        };
        let mut tracked = self.lock();
        if let Some(t) = tracked.get_mut(key) {
            t.hits = t.hits.saturating_add(hits);
            return Some(t.share);
        }
        let share = if self.synced.load(Ordering::Relaxed) {
            follow.floor
        } else {
            regions.share_of(region)
        };
        if tracked.len() < self.max_keys {
            let t = Tracked {
                limit: limit.full_key.clone(),
                regions: regions.clone(),
                hits,
                share,
                idle: 0,
            };
            tracked.insert(key.to_string(), t);
        }
        Some(share)
    }

    /// Every tracked key with the hits since the previous round (which start again from 0).
    /// Keys idle for [`IDLE_ROUNDS`] rounds are forgotten instead.
    pub fn take_round(&self) -> Vec<DemandRound> {
        let mut tracked = self.lock();
        tracked.retain(|_, t| {
            t.idle = if t.hits == 0 { t.idle + 1 } else { 0 };
            t.idle <= IDLE_ROUNDS
        });
        tracked
            .iter_mut()
            .map(|(key, t)| DemandRound {
                key: key.clone(),
                regions: t.regions.clone(),
                hits: std::mem::take(&mut t.hits),
                share: t.share,
            })
            .collect()
    }

    /// Puts `share` in force for `key` (when it is still tracked).
    pub fn apply(&self, key: &str, share: f64) {
        if let Some(t) = self.lock().get_mut(key) {
            t.share = share;
        }
    }

    /// This region's share of every tracked key, for listings: (key, limit's `full_key`, share),
    /// by key.
    pub fn current(&self) -> Vec<(String, String, f64)> {
        let tracked = self.lock();
        let mut out: Vec<(String, String, f64)> = tracked
            .iter()
            .map(|(k, t)| (k.clone(), t.limit.clone(), t.share))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tracked>> {
        // A panic elsewhere cannot leave a share half-written: each update is one assignment.
        self.tracked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
