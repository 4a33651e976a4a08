//! The sync of demand-following shares: every `REGION_SYNC_INTERVAL`, each instance records that
//! it is alive and announces the keys it starts posting (`lua/region_members.lua`, one call,
//! which also answers the keys other instances announced), then runs through the key's demand
//! boards (`lua/region_demand.lua`, one script call per key, all of them pipelined) every active
//! key of a `follow_demand` limit that it is on the board of, starts posting, or saw announced,
//! and moves its region's share of each key it is on the board for ([`super::engage`]: who
//! posts, who leaves, when a share may rise). A key no other instance asks for costs no call.
//!
//! The global store holds the quota service's demand board format, one hash per key and region,
//! with one field per instance: a region's demand is the sum of its instances' (so N instances of
//! a region never count it N times, and no instance needs to be elected). An entry lives
//! [`ENTRY_INTERVALS`] intervals; entries of an instance that stopped running rounds while its
//! region goes on stop counting after two ([`super::members`]), so a restarted instance's old
//! demand does not linger, while a region cut off as a whole keeps its demand on the board that
//! long and the others do not take its share. Keys idle for
//! [`ratelimitd_core::region::table::IDLE_ROUNDS`] rounds are dropped.
//!
//! The calls go through the global store's own circuit breaker (target `global`, settings
//! `REDIS_BREAKER_*`): once it opens, rounds make no call until its cool-down has passed, then one
//! round probes. A round that cannot reach the global store changes no share: the region keeps
//! enforcing the last one (never the whole limit, never zero) for [`LEASE_INTERVALS`] intervals
//! after the start of its last round that did (the lease, [`RegionShares::renew_lease`], which
//! every decision checks: a stalled task cannot extend it), then falls to its floors; the other
//! regions count the shares its entries record until two intervals after that (the instance is
//! then *lapsed*: [`super::members::lapsed`]), so nobody takes a share its region may still
//! enforce. A round whose answer comes after the lease ran out leaves every key at its floor.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::engage::Standing;
use super::members::{Presence, lapsed};
use crate::store::redis::RedisStore;
use crate::store::redis::region_demand::{BoardMode, BoardTurn, Entries, board_name};
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::region::{DemandRound, RegionShares, Regions, share};
use ratelimitd_core::resilience::{Breaker, BreakerReport, Permit};

/// Intervals a posted demand lives on the board.
pub(crate) const ENTRY_INTERVALS: u32 = 30;

/// Intervals an instance keeps a share above its floor without a round that reached the global
/// store: then it falls back to its floor on its own, and the other regions, which stop counting
/// its entries [`LEASE_INTERVALS`] + 2 intervals after its last round, may take the rest.
pub const LEASE_INTERVALS: u32 = 10;

/// The global store's breaker, in logs and metrics.
pub(crate) const BREAKER_TARGET: &str = "global";

/// A key that goes through the boards this round (with this region's index among its listed
/// ones), its demand in thousandths and what it does on its own board.
type Calling<'k> = (&'k (DemandRound, usize), (u64, BoardMode));

/// What this instance remembers of each key between rounds.
type Standings = HashMap<String, Standing, ahash::RandomState>;

/// How the last rounds went, for the status page, `/rlconfig` and the metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncStatus {
    /// When the last round that reached the global store ended.
    pub last_ok: Option<Timestamp>,
    /// Rounds that failed (or that the open breaker kept from the global store).
    pub failures: u64,
    /// Whether the last round failed.
    pub failing: bool,
    /// The last failure's error.
    pub last_error: Option<String>,
    /// Active keys of `follow_demand` limits at the last successful round.
    pub keys: usize,
    /// Of those, the keys this instance is on the board for (contested, or climbing).
    pub on_board: usize,
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
    breaker: Option<Arc<Breaker>>,
    last_round: Mutex<Option<Timestamp>>,
    /// When the last round read the announced keys.
    last_read: Mutex<Option<Timestamp>>,
    standings: Mutex<Standings>,
    status: Mutex<SyncStatus>,
}

impl RegionSync {
    /// A sync of `shares` (whose region is set) through `global`, as instance `member`, behind
    /// `breaker` (none: every round calls).
    pub fn new(
        shares: Arc<RegionShares>,
        global: Arc<RedisStore>,
        member: u64,
        (interval, clock): (Duration, Arc<dyn Clock>),
        breaker: Option<Breaker>,
    ) -> RegionSync {
        RegionSync {
            region: shares.region().unwrap_or_default().to_string(),
            shares,
            global,
            member,
            interval,
            clock,
            breaker: breaker.map(Arc::new),
            last_round: Mutex::new(None),
            last_read: Mutex::new(None),
            standings: Mutex::default(),
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

    /// The global store's breaker (none when `REDIS_BREAKER_FAILURES` is 0).
    pub fn breaker_reports(&self) -> Vec<BreakerReport> {
        self.breaker.iter().map(|b| b.report()).collect()
    }

    /// How long ago the last successful round ended (`None`: never).
    pub fn age(&self) -> Option<Duration> {
        let last = self.status.lock().last_ok?;
        let now = self.clock.now().as_micros();
        Some(Duration::from_micros(now.saturating_sub(last.as_micros())))
    }

    /// One round: says this instance is alive, runs every active key through its boards, moves
    /// the shares. Without an answer (or with the breaker open) no share changes.
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
        // A round that starts after the lease ran out (a task that was stalled) posts the floors
        // the decisions already enforce.
        self.lapse(now);
        // The lease this round started under (still running, or none yet).
        let lease = self.shares.lease().filter(|until| now < *until);
        let keys = self.shares.take_round();
        let permit = self.breaker.as_ref().map(|b| b.permit());
        let result = match permit {
            Some(Permit::Rejected) => Err(
                "the global store's circuit breaker is open; no call until its cool-down passes"
                    .to_string(),
            ),
            _ => self.exchange(keys, secs, now).await,
        };
        if let (Some(b), Some(p)) = (&self.breaker, permit) {
            b.record(p, result.is_ok());
        }
        let mut status = self.status.lock();
        match result {
            Ok((keys, on_board)) => {
                if status.failing {
                    tracing::info!(region = %self.region, "the global store answers again; region shares follow demand again");
                }
                status.failing = false;
                status.last_ok = Some(self.clock.now());
                status.keys = keys;
                status.on_board = on_board;
                // An answer that comes after the lease ran out cannot restore what the round
                // moved (it started from the shares above the floors): meanwhile the others may
                // have stopped counting this instance's entries and been granted its share. It
                // renews the lease from this round's start (when the others see this instance's
                // line), but from the floors.
                if lease.is_some_and(|until| self.clock.now() >= until) {
                    self.fall_to_floor();
                }
                let lease = self.interval.saturating_mul(LEASE_INTERVALS);
                self.shares.renew_lease(now.saturating_add(lease));
            }
            Err(e) => {
                if !status.failing {
                    tracing::warn!(region = %self.region, error = %e, "cannot reach the global store; this region keeps its last shares for a while, then its floors");
                }
                self.lapse(now);
                status.failing = true;
                status.failures += 1;
                status.last_error = Some(e);
            }
        }
    }

    /// Falls back to the floor of every key once the shares' lease has run out at `now`: the
    /// other regions stop counting this instance's entries two intervals later. (Decisions find
    /// the floors from then on anyway, [`RegionShares::share`]; this lowers the keys no decision
    /// read, and drops the rises asked for, before they are posted.)
    fn lapse(&self, now: Timestamp) {
        if self.shares.lease().is_none_or(|until| now < until) {
            return;
        }
        let fell = self.fall_to_floor();
        if fell > 0 {
            tracing::warn!(region = %self.region, keys = fell, "no round reached the global store for {LEASE_INTERVALS} intervals; the shares of these keys fall to their floors");
        }
    }

    /// Every key at its floor, no rise asked for; how many keys fell.
    fn fall_to_floor(&self) -> usize {
        let fell = self.shares.fall_to_floor();
        for s in self.standings.lock().values_mut() {
            s.want = None;
        }
        fell
    }

    /// The round's calls and what they move: (keys run, keys on the board).
    async fn exchange(
        &self,
        keys: Vec<DemandRound>,
        secs: f64,
        now: Timestamp,
    ) -> Result<(usize, usize), String> {
        let keys: Vec<(DemandRound, usize)> = (keys.into_iter())
            .filter(|k| k.regions.follow.is_some())
            .filter_map(|k| Some((k.regions.index_of(&self.region)?, k)))
            .map(|(me, k)| (k, me))
            .collect();
        // The standings are taken out for the round (its calls are awaited without the lock)
        // and put back whatever happens: a failed call moved nothing on the boards.
        let mut standings = std::mem::take(&mut *self.standings.lock());
        let moved = self.exchange_keys(&keys, &mut standings, secs, now).await;
        if moved.is_ok() {
            let active: HashSet<&str> = keys.iter().map(|(k, _)| k.key.as_str()).collect();
            standings.retain(|key, _| active.contains(key.as_str()));
        }
        *self.standings.lock() = standings;
        moved.map(|on_board| (keys.len(), on_board))
    }

    /// Plans every key's turn, reads the members and the announced keys, runs the boards of
    /// the keys that cost a call and settles their shares; how many keys are on the board.
    async fn exchange_keys(
        &self,
        keys: &[(DemandRound, usize)],
        standings: &mut Standings,
        secs: f64,
        now: Timestamp,
    ) -> Result<usize, String> {
        let names = self.region_names(keys);
        let hold = self.interval * ENTRY_INTERVALS;
        let now_ms = now.as_micros() / 1000;
        let planned: Vec<(u64, BoardMode)> = (keys.iter())
            .map(|(k, _)| {
                // The key is copied only the first time it is seen.
                let standing = match standings.get_mut(&k.key) {
                    Some(s) => s,
                    None => standings.entry(k.key.clone()).or_default(),
                };
                standing.plan(k, secs, now_ms, (millis(hold), ENTRY_INTERVALS))
            })
            .collect();
        let announce: Vec<String> = (keys.iter().zip(&planned))
            .filter(|((k, _), (milli, mode))| {
                (standings.get(&k.key)).is_some_and(|s| s.announces(*milli, *mode))
            })
            .map(|((k, _), _)| k.key.clone())
            .collect();
        let (asked, members) = self.read_members(&names, now, hold, &announce).await?;
        let interval_ms = millis(self.interval);
        // Instances that ran no round for longer than an instance keeps its shares without one
        // (and a margin): their entries hold no share any more.
        let stale: Vec<u64> = (members.iter())
            .flat_map(|m| lapsed(m, now_ms, interval_ms))
            .collect();
        let presence: HashMap<&str, Presence> = (names.iter())
            .zip(members.iter().map(|m| Presence::of(m, now_ms, interval_ms)))
            .map(|(n, p)| (n.as_str(), p))
            .collect();
        // Only keys this instance is on the board of, starts posting, or another instance
        // announced cost a call: a key nobody else asks for costs nothing global.
        let calling: Vec<Calling<'_>> = (keys.iter().zip(planned))
            .filter(|((k, _), (_, mode))| {
                let asked = asked.contains(&k.key);
                (standings.get(&k.key)).is_some_and(|s| s.calls(*mode, asked))
            })
            .collect();
        let turns = turns(&calling, standings);
        let call = (self.global).exchange_boards(self.member, (now, hold), &stale, &turns);
        let replies = Box::pin(call).await.map_err(|e| e.to_string())?;
        let unseen = Presence::Unseen;
        let mut on_board = 0;
        for ((k, me), (turn, reply)) in calling.iter().map(|c| c.0).zip(turns.iter().zip(&replies))
        {
            let presence: Vec<&Presence> = (k.regions.shares.keys())
                .map(|r| presence.get(r.as_str()).unwrap_or(&unseen))
                .collect();
            let standing = standings.entry(k.key.clone()).or_default();
            let at = (*me, self.member, now_ms);
            if let Some(next) = standing.settle(k, at, (turn, reply), &presence) {
                self.shares.apply(&k.key, next);
                on_board += 1;
            }
        }
        Ok(on_board)
    }

    /// Every region the round's keys list, and this instance's, in order: the members call
    /// reads one presence per name.
    fn region_names(&self, keys: &[(DemandRound, usize)]) -> Vec<String> {
        // The keys of one limit share its `regions`: each distinct one adds its names once.
        let mut seen: Vec<&Arc<Regions>> = Vec::new();
        for (k, _) in keys {
            if !seen.iter().any(|r| Arc::ptr_eq(r, &k.regions)) {
                seen.push(&k.regions);
            }
        }
        let mut names: BTreeSet<&str> = (seen.iter())
            .flat_map(|r| r.shares.keys().map(String::as_str))
            .collect();
        names.insert(&self.region);
        names.into_iter().map(str::to_string).collect()
    }

    /// Records this instance alive, announces `announce`, and reads the keys the others
    /// announced since the last read and every region's members.
    async fn read_members(
        &self,
        names: &[String],
        now: Timestamp,
        hold: Duration,
        announce: &[String],
    ) -> Result<(HashSet<String>, Entries), String> {
        let own = names.iter().position(|n| *n == self.region).unwrap_or(0);
        // A margin of two intervals for the instances' clocks; at first, all that is kept.
        let since = self
            .last_read
            .lock()
            .map_or(now.as_micros().saturating_sub(micros(hold)), |t| {
                t.as_micros().saturating_sub(2 * micros(self.interval))
            });
        let times = (now, Timestamp::from_micros(since), hold);
        let call = (self.global).region_members((names, own), self.member, times, announce);
        let (asked, members) = Box::pin(call).await.map_err(|e| e.to_string())?;
        *self.last_read.lock() = Some(now);
        Ok((asked.into_iter().collect(), members))
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

/// The board turns of the keys that cost a call: each asks for at least the share it holds.
fn turns(calling: &[Calling<'_>], standings: &Standings) -> Vec<BoardTurn> {
    (calling.iter())
        .map(|((k, me), (milli, mode))| BoardTurn {
            boards: (k.regions.shares.keys())
                .map(|r| board_name(&k.key, r))
                .collect(),
            own: *me,
            milli: *milli,
            mode: *mode,
            held: share::ppm(k.share),
            want: (standings.get(&k.key))
                .and_then(|s| s.want)
                .unwrap_or(0)
                .max(share::ppm(k.share)),
            floor: k.regions.follow.map_or(0, |f| share::ppm(f.floor)),
        })
        .collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
