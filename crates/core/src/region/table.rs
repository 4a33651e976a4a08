//! [`RegionShares`]: what the limiter asks, per op of a regional limit, for this region's share.
//! Static shares come straight from the limit's [`Regions`]; demand-following ones are kept per
//! active key (the cache key of one descriptor's counter), together with the hits seen since the
//! last sync, which the sync task ([`RegionShares::take_round`]) turns into this instance's
//! demand and answers with the key's new share ([`RegionShares::apply`]).
//!
//! A key new to this instance starts at the limit's floor, whether or not the instance has ever
//! reached the global store: the floor is all a region may hold without an entry on the board
//! recording more (the others count a region that shows nothing at its floor, and may already
//! hold the rest), and the share rises only through what the global store grants. Keys are
//! bounded: past [`RegionShares::with_max_keys`] a new key keeps its floor and is not synced.
//!
//! A share above the floor holds only under the sync's lease ([`RegionShares::renew_lease`]): a
//! decision that reads a key's share once the lease has run out finds the floor, and lowers the
//! key to it, whether or not the sync task has run a round since (a stalled task, or a global
//! store that hangs, cannot keep a lapsed share in force).
//!
//! Every decision of a demand-following limit looks its key up here, so the keys are spread over
//! [`SHARDS`] locks by a keyed hash drawn per process (as the over-limit cache and the leases do):
//! decisions on different keys seldom wait for each other or for a sync round, which takes one
//! shard at a time, and a lookup hashes its key in a few tens of instructions. The cap counts
//! keys across all shards, so an uneven spread fills none early.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::Regions;
use crate::clock::Timestamp;
use crate::config::Limit;

/// Keys tracked by default.
const MAX_KEYS: usize = 100_000;

/// Locks the keys are spread over.
pub const SHARDS: usize = 16;

/// Rounds a key may stay idle before it is forgotten (its next request starts over at the floor).
pub const IDLE_ROUNDS: u32 = 30;

/// One demand-following key.
#[derive(Debug)]
struct Tracked {
    /// The limit's `full_key`, for listings per limit.
    limit: String,
    regions: Arc<Regions>,
    /// The worldwide limit in requests per second, to tell when demand presses on a share.
    rate: f64,
    /// Hits seen since the last round.
    hits: u64,
    /// This region's share in force.
    share: f64,
    /// Rounds in a row without hits.
    idle: u32,
}

type Shard = HashMap<String, Tracked, ahash::RandomState>;

/// One key's turn in a sync round.
#[derive(Debug, Clone, PartialEq)]
pub struct DemandRound {
    /// The cache key.
    pub key: String,
    /// The limit's regions.
    pub regions: Arc<Regions>,
    /// The worldwide limit in requests per second (`requests_per_unit` over its unit).
    pub rate: f64,
    /// Hits this instance saw since the previous round.
    pub hits: u64,
    /// This region's share in force.
    pub share: f64,
}

/// The region this process serves and its demand-following shares.
#[derive(Debug)]
pub struct RegionShares {
    region: Option<String>,
    /// Picks a key's shard.
    hasher: ahash::RandomState,
    shards: Box<[Mutex<Shard>]>,
    /// Keys tracked in all shards.
    count: AtomicUsize,
    max_keys: usize,
    /// Until when (microseconds on the decision clock, excluded) a share above its floor holds:
    /// 0, before any round reached the global store.
    lease_until: AtomicU64,
}

impl Default for RegionShares {
    /// No region: every limit is enforced whole.
    fn default() -> RegionShares {
        RegionShares {
            region: None,
            hasher: ahash::RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            count: AtomicUsize::new(0),
            max_keys: MAX_KEYS,
            lease_until: AtomicU64::new(0),
        }
    }
}

impl RegionShares {
    /// Shares for the instances of `region`.
    pub fn new(region: impl Into<String>) -> RegionShares {
        RegionShares {
            region: Some(region.into()),
            ..RegionShares::default()
        }
    }

    /// The same, tracking at most `max_keys` demand-following keys.
    pub fn with_max_keys(mut self, max_keys: usize) -> RegionShares {
        self.max_keys = max_keys;
        self
    }

    /// A sync round reached the global store: the shares above their floors hold until `until`
    /// (excluded), when decisions start finding the floors.
    pub fn renew_lease(&self, until: Timestamp) {
        self.lease_until.store(until.as_micros(), Ordering::Relaxed);
    }

    /// Until when the shares above their floors hold (`None`: no round has reached the global
    /// store yet, so none is above its floor).
    pub fn lease(&self) -> Option<Timestamp> {
        let until = self.lease_until.load(Ordering::Relaxed);
        (until > 0).then(|| Timestamp::from_micros(until))
    }

    /// Whether shares above their floors hold at `now`.
    fn leased(&self, now: Timestamp) -> bool {
        now.as_micros() < self.lease_until.load(Ordering::Relaxed)
    }

    /// The region, when one is set.
    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }

    /// This region's share of `limit` for the counter `key` that `hits` are about to be counted
    /// on at `now`; `None` when the limit is global or no region is set. A demand-following
    /// limit's hits are recorded for the next sync; its share is the key's floor when the key is
    /// new, or when the lease has run out at `now` (the key is then lowered to it).
    pub fn share(&self, limit: &Limit, key: &str, hits: u64, now: Timestamp) -> Option<f64> {
        let region = self.region.as_deref()?;
        let regions = limit.regions.as_ref()?;
        let Some(follow) = regions.follow else {
            return Some(regions.share_of(region));
        };
        let mut shard = self.shard(key).lock();
        if let Some(t) = shard.get_mut(key) {
            t.hits = t.hits.saturating_add(hits);
            if t.share > follow.floor && !self.leased(now) {
                t.share = follow.floor;
            }
            return Some(t.share);
        }
        let share = follow.floor;
        // Counted before the insert, so that racing shards never pass the cap together.
        let room = (self.count)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max_keys).then_some(n + 1)
            })
            .is_ok();
        if room {
            let t = Tracked {
                limit: limit.full_key.clone(),
                regions: regions.clone(),
                rate: rate_of(limit),
                hits,
                share,
                idle: 0,
            };
            shard.insert(key.to_string(), t);
        }
        Some(share)
    }

    /// Every tracked key with the hits since the previous round (which start again from 0).
    /// Keys idle for [`IDLE_ROUNDS`] rounds are forgotten instead.
    pub fn take_round(&self) -> Vec<DemandRound> {
        let mut out = Vec::with_capacity(self.count.load(Ordering::Relaxed));
        for shard in &self.shards {
            let mut shard = shard.lock();
            let before = shard.len();
            shard.retain(|_, t| {
                t.idle = if t.hits == 0 { t.idle + 1 } else { 0 };
                t.idle <= IDLE_ROUNDS
            });
            self.count
                .fetch_sub(before - shard.len(), Ordering::Relaxed);
            out.extend(shard.iter_mut().map(|(key, t)| DemandRound {
                key: key.clone(),
                regions: t.regions.clone(),
                rate: t.rate,
                hits: std::mem::take(&mut t.hits),
                share: t.share,
            }));
        }
        out
    }

    /// Puts `share` in force for `key` (when it is still tracked).
    pub fn apply(&self, key: &str, share: f64) {
        if let Some(t) = self.shard(key).lock().get_mut(key) {
            t.share = share;
        }
    }

    /// Lowers every tracked key held above its limit's floor to the floor (what a region that
    /// cannot confirm its shares with the global store may still hold); how many fell.
    pub fn fall_to_floor(&self) -> usize {
        let mut fell = 0;
        for shard in &self.shards {
            for t in shard.lock().values_mut() {
                let Some(follow) = t.regions.follow else {
                    continue;
                };
                if t.share > follow.floor {
                    t.share = follow.floor;
                    fell += 1;
                }
            }
        }
        fell
    }

    /// This region's share in force at `now` of every tracked key, for listings: (key, limit's
    /// `full_key`, share), by key. A share whose lease has run out shows as its floor.
    pub fn current(&self, now: Timestamp) -> Vec<(String, String, f64)> {
        let leased = self.leased(now);
        let in_force = |t: &Tracked| match t.regions.follow {
            Some(f) if !leased => t.share.min(f.floor),
            _ => t.share,
        };
        let mut out: Vec<(String, String, f64)> = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock();
            out.extend(
                shard
                    .iter()
                    .map(|(k, t)| (k.clone(), t.limit.clone(), in_force(t))),
            );
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The lock of `key`'s shard. (`parking_lot`'s locks are not poisoned: a panic elsewhere cannot
    /// leave a share half-written anyway, each update being one assignment.)
    fn shard(&self, key: &str) -> &Mutex<Shard> {
        let i = self.hasher.hash_one(key) as usize % SHARDS;
        &self.shards[i]
    }
}

/// `limit` in requests per second (0 for a limit without a unit, which never presses).
fn rate_of(limit: &Limit) -> f64 {
    let secs = limit.unit.map_or(0, crate::config::Unit::seconds);
    if secs == 0 {
        return 0.0;
    }
    f64::from(limit.requests_per_unit) / secs as f64
}
