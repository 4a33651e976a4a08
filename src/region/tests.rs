//! The shares in force, sampled after every instance's round, never add up to more than the
//! whole limit: instances of two and three regions run the real per-key rules ([`Standing`])
//! against a model of the global store's script (`lua/region_demand.lua`: the same grant, kept
//! apart from the network), in orders drawn from a seeded generator, on a manual clock, while
//! demand moves between the regions and one region is cut off from the global store (its rounds
//! fail) or stalls (it runs none) and comes back. Every instance starts at its floor, and a
//! share above it is in force only under the lease, as a decision reads it. The integration
//! test `regions::bound` samples the same sum through real redis-servers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::engage::Standing;
use super::members::{Presence, lapsed};
use super::sync::{ENTRY_INTERVALS, LEASE_INTERVALS};
use crate::store::redis::region_demand::{BoardMode, BoardReply, BoardTurn};
use ratelimitd_core::random::{Random, SeededRandom};
use ratelimitd_core::region::share::{self, PPM};
use ratelimitd_core::region::{DemandRound, FollowDemand, Regions};

/// One entry: demand (thousandths), expiry (ms), share (ppm).
type Entry = (u64, u64, u64);

/// The global store for one key, as the two scripts keep it.
#[derive(Default)]
struct Global {
    /// Per region: instance → entry.
    boards: Vec<HashMap<u64, Entry>>,
    /// Per region: instance → its last round (ms).
    members: Vec<HashMap<u64, u64>>,
    /// When the key was last announced (ms).
    announced: Option<u64>,
}

impl Global {
    /// `lua/region_demand.lua` for `member` of region `turn.own`.
    fn call(
        &mut self,
        member: u64,
        turn: &BoardTurn,
        (now, ttl): (u64, u64),
        stale: &HashSet<u64>,
    ) -> BoardReply {
        let live = |b: &HashMap<u64, Entry>| -> Vec<(u64, u64)> {
            let mut v: Vec<(u64, u64)> = (b.iter())
                .filter(|(_, e)| e.1 > now)
                .map(|(m, e)| (*m, e.0))
                .collect();
            v.sort_unstable();
            v
        };
        let mut taken = 0;
        let mut contested = false;
        for (i, b) in self.boards.iter().enumerate() {
            if i == turn.own {
                continue;
            }
            let most = (b.iter())
                .filter(|(m, e)| e.1 > now && !stale.contains(m))
                .map(|(_, e)| e.2)
                .max()
                .unwrap_or(0);
            taken += most.max(turn.floor);
            contested |= b.values().any(|e| e.1 > now && e.0 > 0);
        }
        let mine = &mut self.boards[turn.own];
        if turn.mode == BoardMode::PostIfContested && !contested {
            contested = (mine.iter()).any(|(m, e)| *m != member && e.1 > now && e.0 > 0);
        }
        let post =
            turn.mode == BoardMode::Post || (turn.mode == BoardMode::PostIfContested && contested);
        if turn.mode == BoardMode::Leave {
            mine.remove(&member);
        }
        let mut granted = 0;
        if post {
            granted = turn.want.min(PPM.saturating_sub(taken));
            mine.insert(member, (turn.milli, now + ttl, turn.held.max(granted)));
            mine.retain(|_, e| e.1 > now);
        }
        BoardReply {
            posted: post,
            granted,
            regions: self.boards.iter().map(live).collect(),
        }
    }
}

/// One instance following one key.
struct Instance {
    region: usize,
    member: u64,
    share: f64,
    standing: Standing,
    hits: u64,
    /// The start of its last round that reached the global store.
    lease_from: Option<u64>,
    last_read: Option<u64>,
    /// Cut off from the global store: its rounds fail.
    cut: bool,
    /// Its sync task is stalled: it runs no round at all.
    stalled: bool,
    /// Its last round waited for this tick.
    late: bool,
}

const INTERVAL: u64 = 1_000;

/// What keeps a region from the global store during a phase.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Its rounds fail.
    Cut(usize),
    /// Its instances run no round.
    Stall(usize),
}
use Fault::{Cut, Stall};

impl Instance {
    /// Whether the lease holds at `now`: the start of its last round that reached the global
    /// store was less than [`LEASE_INTERVALS`] ago.
    fn leased(&self, now: u64) -> bool {
        let lease = INTERVAL * u64::from(LEASE_INTERVALS);
        self.lease_from.is_some_and(|f| now < f + lease)
    }

    /// The share in force at `now`, as a decision reads it (`RegionShares::share`): the floor
    /// once the lease has run out.
    fn in_force(&self, now: u64, floor: f64) -> f64 {
        if self.leased(now) {
            self.share
        } else {
            self.share.min(floor)
        }
    }

    /// One round at `now` (ms), as `RegionSync::round` runs it for this key.
    fn round(&mut self, g: &mut Global, regions: &Arc<Regions>, rate: f64, now: u64) {
        let follow = regions.follow.unwrap();
        let hold = INTERVAL * u64::from(ENTRY_INTERVALS);
        // Past the lease, the keys fall to their floors before the round plans anything.
        if !self.leased(now) && self.share > follow.floor {
            self.share = follow.floor;
            self.standing.want = None;
        }
        let k = DemandRound {
            key: "k".into(),
            regions: regions.clone(),
            rate,
            hits: std::mem::take(&mut self.hits),
            share: self.share,
        };
        let (milli, mode) = self.standing.plan(&k, 1.0, now, (hold, ENTRY_INTERVALS));
        if self.cut {
            // The round fails: no share moves but the lease's.
            return;
        }
        if self.standing.announces(milli, mode) {
            g.announced = Some(now);
        }
        g.members[self.region].insert(self.member, now);
        let since = self.last_read.map_or(0, |t| t.saturating_sub(2 * INTERVAL));
        let asked = g.announced.is_some_and(|a| a >= since);
        self.last_read = Some(now);
        let members: Vec<Vec<(u64, u64)>> = (g.members.iter())
            .map(|m| m.iter().map(|(a, b)| (*a, *b)).collect())
            .collect();
        let stale: HashSet<u64> = (members.iter())
            .flat_map(|m| lapsed(m, now, INTERVAL))
            .collect();
        let presence: Vec<Presence> = (members.iter())
            .map(|m| Presence::of(m, now, INTERVAL))
            .collect();
        if self.standing.calls(mode, asked) {
            let turn = BoardTurn {
                boards: Vec::new(),
                own: self.region,
                milli,
                mode,
                held: share::ppm(self.share),
                want: self.standing.want.unwrap_or(0).max(share::ppm(self.share)),
                floor: share::ppm(follow.floor),
            };
            let reply = g.call(self.member, &turn, (now, hold), &stale);
            let presence: Vec<&Presence> = presence.iter().collect();
            let at = (self.region, self.member, now);
            if let Some(next) = self.standing.settle(&k, at, (&turn, &reply), &presence) {
                self.share = next;
            }
        }
        self.lease_from = Some(now);
    }
}

/// The regions `names` (`per_region` instances each) sharing a limit of 600 a minute, listed on
/// equal shares, every instance starting at its floor; `phases` of (ticks, demand per second of
/// each region, the region cut off or stalled); rounds every tick in an order drawn from `seed`,
/// each instance skipping a tick now and then (never two in a row). The shares in force (the
/// largest of each region's instances) are summed after every round; returns the largest sum,
/// each region's largest share per phase and its share at the end of each phase.
fn run(
    names: &[&str],
    per_region: usize,
    (floor, max_step): (f64, f64),
    phases: &[(u64, &[f64], Option<Fault>)],
    seed: u64,
) -> (u64, Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let n = names.len();
    let listed: BTreeMap<String, f64> = (names.iter())
        .map(|r| (r.to_string(), 1.0 / n as f64))
        .collect();
    let regions = Arc::new(Regions {
        path: "r".into(),
        shares: listed,
        default_share: 0.0,
        follow: Some(FollowDemand { floor, max_step }),
    });
    let rate = 10.0;
    let mut g = Global {
        boards: vec![HashMap::new(); n],
        members: vec![HashMap::new(); n],
        announced: None,
    };
    let mut all: Vec<Instance> = (0..n * per_region)
        .map(|i| Instance {
            region: i % n,
            member: 100 + i as u64,
            share: floor,
            standing: Standing::default(),
            hits: 0,
            lease_from: None,
            last_read: None,
            cut: false,
            stalled: false,
            late: false,
        })
        .collect();
    let draw = SeededRandom::new(seed);
    let mut now = 1_000_000;
    let mut most = 0;
    let mut peaks = Vec::new();
    let mut ends = Vec::new();
    for (ticks, demand, cut) in phases {
        let mut peak = vec![0.0; n];
        for inst in &mut all {
            inst.cut = *cut == Some(Cut(inst.region));
            inst.stalled = *cut == Some(Stall(inst.region));
        }
        for _ in 0..*ticks {
            now += INTERVAL;
            let mut order: Vec<usize> = (0..all.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, (draw.unit() * (i + 1) as f64) as usize);
            }
            for i in order {
                let inst = &mut all[i];
                inst.hits += (demand[inst.region] / per_region as f64).round() as u64;
                // A late timer: now and then an instance's round waits for the next tick (never
                // longer: every instance runs a round at least once in two intervals, the margin
                // the others give a region cut off before they stop counting its shares).
                let late = draw.unit() < 1.0 / 7.0 && !inst.late;
                inst.late = late;
                if late || inst.stalled {
                    continue;
                }
                inst.round(&mut g, &regions, rate, now);
                let mut held = vec![0_u64; n];
                for x in &all {
                    let in_force = share::ppm(x.in_force(now, floor));
                    held[x.region] = held[x.region].max(in_force);
                }
                let sum: u64 = held.iter().sum();
                assert!(
                    sum <= PPM,
                    "seed {seed}: the shares in force add up to {sum} ppm: {held:?}"
                );
                most = most.max(sum);
                for (p, h) in peak.iter_mut().zip(&held) {
                    *p = f64::max(*p, share::from_ppm(*h));
                }
            }
        }
        peaks.push(peak);
        let mut end = vec![0.0; n];
        for x in &all {
            end[x.region] = f64::max(end[x.region], x.in_force(now, floor));
        }
        ends.push(end);
    }
    (most, peaks, ends)
}

#[test]
fn two_regions_never_hold_more_than_the_limit_while_demand_moves_and_one_is_cut_off() {
    for seed in 1..=100 {
        let phases: &[(u64, &[f64], Option<Fault>)] = &[
            (20, &[30.0, 0.0], None),
            (20, &[0.0, 30.0], None),
            (15, &[30.0, 30.0], None),
            // us is cut off while the demand moves to eu: eu takes nothing of us's share until
            // us's lease ran out (us then holds its floor), then climbs.
            (30, &[30.0, 0.0], Some(Cut(1))),
            (20, &[0.0, 30.0], None),
        ];
        let (most, peaks, _) = run(&["eu", "us"], 2, (0.1, 0.2), phases, seed);
        assert!(
            most > PPM * 95 / 100,
            "seed {seed}: the budget is used: {most}"
        );
        assert!(
            peaks[0][0] >= 0.9 - 1e-9,
            "seed {seed}: eu climbs: {peaks:?}"
        );
        assert!(
            peaks[1][1] >= 0.9 - 1e-9,
            "seed {seed}: us climbs: {peaks:?}"
        );
        assert!(
            peaks[3][0] >= 0.9 - 1e-9,
            "seed {seed}: eu climbs after the lease: {peaks:?}"
        );
        assert!(
            peaks[4][1] >= 0.9 - 1e-9,
            "seed {seed}: us is back: {peaks:?}"
        );
    }
}

#[test]
fn three_regions_never_hold_more_than_the_limit_while_demand_moves_and_one_is_cut_off() {
    for seed in 1..=100 {
        let phases: &[(u64, &[f64], Option<Fault>)] = &[
            (30, &[30.0, 0.0, 0.0], None),
            (30, &[0.0, 0.0, 30.0], None),
            (15, &[0.0, 30.0, 30.0], None),
            (40, &[30.0, 10.0, 0.0], Some(Cut(2))),
            (20, &[5.0, 5.0, 30.0], None),
            // us's task stalls while it holds most of the limit: it falls to its floor when its
            // lease runs out, and the others take the rest only after that.
            (30, &[30.0, 10.0, 30.0], Some(Stall(2))),
        ];
        let (most, peaks, _) = run(&["ap", "eu", "us"], 1, (0.05, 0.1), phases, seed);
        assert!(
            most > PPM * 95 / 100,
            "seed {seed}: the budget is used: {most}"
        );
        assert!(
            peaks[0][0] >= 0.9 - 1e-9,
            "seed {seed}: ap climbs: {peaks:?}"
        );
        assert!(
            peaks[1][2] >= 0.9 - 1e-9,
            "seed {seed}: us climbs: {peaks:?}"
        );
        assert!(
            peaks[3][0] >= 0.6,
            "seed {seed}: ap climbs after the lease: {peaks:?}"
        );
    }
}

/// During a cut the region cut off keeps enforcing its last share while its lease runs, and the
/// connected region's demand takes nothing of it (the sum of the shares in force, asserted after
/// every round, stays at most 1).
#[test]
fn a_region_cut_off_keeps_its_share_for_the_lease_and_nobody_takes_it_meanwhile() {
    for seed in 1..=100 {
        let settle: &[(u64, &[f64], Option<Fault>)] = &[
            (20, &[30.0, 30.0], None),
            (u64::from(LEASE_INTERVALS) - 3, &[30.0, 0.0], Some(Cut(1))),
        ];
        let (_, peaks, ends) = run(&["eu", "us"], 2, (0.1, 0.2), settle, seed);
        assert!(ends[0][1] >= 0.4, "seed {seed}: {ends:?}");
        assert_eq!(
            ends[1][1], ends[0][1],
            "seed {seed}: us keeps its share: {ends:?}"
        );
        assert!(
            peaks[1][0] <= 1.0 - ends[0][1] + 1e-9,
            "seed {seed}: eu took us's share during the cut: {peaks:?} {ends:?}"
        );
    }
}

/// A region's sync task stalls (it runs no round, so it never sees a failure): the share it holds
/// falls to its floor where the decisions read it once its lease has run out, before the other
/// region, which counts its entries two intervals longer, may take it; its rounds come back and
/// it climbs again through grants.
#[test]
fn a_region_whose_sync_stalls_falls_to_its_floor_when_its_lease_runs_out() {
    for seed in 1..=100 {
        let phases: &[(u64, &[f64], Option<Fault>)] = &[
            (20, &[10.0, 30.0], None),
            (25, &[30.0, 30.0], Some(Stall(1))),
            (25, &[10.0, 30.0], None),
        ];
        let (_, peaks, ends) = run(&["eu", "us"], 2, (0.1, 0.2), phases, seed);
        assert!(ends[0][1] >= 0.6, "seed {seed}: us settled: {ends:?}");
        assert!(
            (ends[1][1] - 0.1).abs() < 1e-9,
            "seed {seed}: us stalled holds its floor: {ends:?}"
        );
        assert!(
            peaks[1][0] >= 0.9 - 1e-9,
            "seed {seed}: eu takes the rest after us's lease: {peaks:?}"
        );
        assert!(ends[2][1] >= 0.6, "seed {seed}: us climbs back: {ends:?}");
    }
}
