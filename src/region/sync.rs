//! The sync of demand-following shares: every `REGION_SYNC_INTERVAL`, each instance posts its
//! demand for every active key of a `follow_demand` limit to the global store and reads every
//! listed region's, then moves this region's share of the key toward its share of the demand
//! ([`share::demand_shares`]; down by at most `max_step` per sync, up by less:
//! [`share::step_own`]).
//!
//! The global store holds the quota service's demand board (`lua/rlqs_demand.lua`), one hash per
//! key and region, `<key>:region:<region>`, with one field per instance of that region: a region's
//! demand is the sum of its instances' (so N instances of a region never count it N times, and no
//! instance needs to be elected). An entry lives [`ENTRY_INTERVALS`] intervals: a region cut off
//! from the global store keeps its last demand on the board that long, so the others keep its
//! share instead of taking it. A key active in one region only still costs that region one
//! post and one read per listed region each interval; keys idle for
//! [`crate::region::table::IDLE_ROUNDS`] rounds are dropped.
//!
//! A round that cannot reach the global store changes no share: the region keeps enforcing the
//! last one (never the whole limit, never zero), and the next round catches up.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use parking_lot::Mutex;

use crate::clock::{Clock, Timestamp};
use crate::region::share;
use crate::region::{DemandRound, RegionShares};
use crate::store::redis::RedisStore;
use crate::store::redis::quota_demand::DemandPost;

/// Intervals a posted demand lives on the board.
pub const ENTRY_INTERVALS: u32 = 30;

/// Keys exchanged at once in a round.
const CONCURRENT_KEYS: usize = 32;

/// How the last rounds went, for the status page, `/rlconfig` and the metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncStatus {
    /// When the last round that reached the global store for every key ended.
    pub last_ok: Option<Timestamp>,
    /// Rounds that failed for at least one key.
    pub failures: u64,
    /// Whether the last round failed.
    pub failing: bool,
    /// The last failure's error.
    pub last_error: Option<String>,
    /// Keys synced by the last round.
    pub keys: usize,
}

/// One instance's sync with the global store.
#[derive(Debug)]
pub struct RegionSync {
    shares: Arc<RegionShares>,
    global: Arc<RedisStore>,
    region: String,
    member: u64,
    interval: Duration,
    clock: Arc<dyn Clock>,
    last_round: Mutex<Option<Timestamp>>,
    status: Mutex<SyncStatus>,
}

impl RegionSync {
    /// A sync of `shares` (whose region is set) through `global`, as instance `member`.
    pub fn new(
        shares: Arc<RegionShares>,
        global: Arc<RedisStore>,
        member: u64,
        interval: Duration,
        clock: Arc<dyn Clock>,
    ) -> RegionSync {
        RegionSync {
            region: shares.region().unwrap_or_default().to_string(),
            shares,
            global,
            member,
            interval,
            clock,
            last_round: Mutex::new(None),
            status: Mutex::new(SyncStatus::default()),
        }
    }

    /// How the last rounds went.
    pub fn status(&self) -> SyncStatus {
        self.status.lock().clone()
    }

    /// The shares this sync moves.
    pub fn shares(&self) -> &Arc<RegionShares> {
        &self.shares
    }

    /// How long ago the last successful round ended (`None`: never).
    pub fn age(&self) -> Option<Duration> {
        let last = self.status.lock().last_ok?;
        let now = self.clock.now().as_micros();
        Some(Duration::from_micros(now.saturating_sub(last.as_micros())))
    }

    /// One round: posts this instance's demand per active key, reads every region's, moves the
    /// shares. Keys the global store does not answer for keep their shares.
    pub async fn round(&self) {
        let now = self.clock.now();
        let elapsed = {
            let mut last = self.last_round.lock();
            let since = last.map_or(self.interval, |l| {
                Duration::from_micros(now.as_micros().saturating_sub(l.as_micros()))
            });
            *last = Some(now);
            since
        };
        let secs = elapsed.as_secs_f64().max(0.001);
        let keys = self.shares.take_round();
        let count = keys.len();
        let results: Vec<Result<(), String>> = futures_util::stream::iter(keys)
            .map(|k| self.sync_key(k, secs, now))
            .buffer_unordered(CONCURRENT_KEYS)
            .collect()
            .await;
        let error = results.into_iter().find_map(Result::err);
        let mut status = self.status.lock();
        status.keys = count;
        match error {
            None => {
                if status.failing {
                    tracing::info!(region = %self.region, "the global store answers again; region shares follow demand again");
                }
                status.failing = false;
                status.last_ok = Some(self.clock.now());
                self.shares.mark_synced();
            }
            Some(e) => {
                if !status.failing {
                    tracing::warn!(region = %self.region, error = %e, "cannot reach the global store; this region keeps its last shares until it can");
                }
                status.failing = true;
                status.failures += 1;
                status.last_error = Some(e);
            }
        }
    }

    /// Exchanges one key's demand with every listed region and applies the new vector.
    async fn sync_key(&self, k: DemandRound, secs: f64, now: Timestamp) -> Result<(), String> {
        let (Some(follow), Some(me)) = (k.regions.follow, k.regions.index_of(&self.region)) else {
            return Ok(());
        };
        let ttl = self.interval * ENTRY_INTERVALS;
        let mut demands = Vec::with_capacity(k.regions.shares.len());
        for region in k.regions.shares.keys() {
            let mine = *region == self.region;
            let turn = DemandPost {
                member: self.member,
                milli: if mine { milli(k.hits as f64 / secs) } else { 0 },
                now,
                ttl,
                post: mine,
            };
            let board = format!("{}:region:{region}", k.key);
            let call = Box::pin(self.global.exchange_demand(&board, turn));
            let values = call.await.map_err(|e| e.to_string())?;
            // The caller's own entry leads the answer; on another region's board it is not one.
            let skip = usize::from(!mine);
            let total: u64 = values.iter().skip(skip).sum();
            demands.push(total as f64 / 1000.0);
        }
        let target = share::demand_shares(&demands, follow.floor)[me];
        let next = share::step_own(k.share, target, follow.max_step, demands.len());
        self.shares.apply(&k.key, next);
        Ok(())
    }

    /// Runs a round every interval until `stop`.
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is immediate: the first round waits one interval, to have hits to post.
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => self.round().await,
            }
        }
    }
}

/// A demand in requests per second as the board holds it: thousandths.
fn milli(per_second: f64) -> u64 {
    (per_second.max(0.0) * 1000.0).round() as u64
}
