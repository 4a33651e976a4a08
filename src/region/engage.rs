//! When one instance tells the global store about a key, and how it moves the key's share: the
//! rule that makes a key used in one region cost no writes there.
//!
//! An instance is *on the board* of a key while its demand entry is live there. It starts posting
//! when its demand presses on its share ([`share::presses`]) and the share can still grow (below
//! [`share::alone`]), or as soon as another region's board (or another instance of its own region)
//! holds a demand for the key: an instance whose demand starts showing on a board announces the
//! key, every instance holding the key looks at its boards in the round it reads the announcement,
//! and the script posts in that same call. It leaves (removes its entry) once no other
//! region shows demand and its region either holds all it can or no longer presses. While on the
//! board it writes only when its demand changed or its entry is half-way to expiry.
//!
//! Only an instance on the board moves its share, from the demand every region sees on the board,
//! so all of them compute the same targets; a share rises only after its instance's entry has
//! shown a demand above 0 for [`RISE_AFTER`] rounds — by then every instance of the other regions
//! that holds a share of the key without being on the board (it climbed earlier, alone, or left
//! when nobody else asked) has read the announcement and posted its own — and never while a region that
//! is cut off as a whole shows nothing on the key's board (it may hold a share nobody can see). An
//! instance off the board keeps its share. So the shares in force still add up to at most 1 at
//! every instant, as `docs/regions.md` derives.

use super::members::Presence;
use super::share;
use crate::region::DemandRound;
use crate::store::redis::region_demand::{BoardMode, BoardReply};

/// Rounds an instance's entry shows a demand above 0 on the board before its share may rise
/// (this one included).
pub(super) const RISE_AFTER: u32 = 3;

/// One instance's standing on one key's board, across rounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Standing {
    /// Rounds in a row its entry has been on the board.
    pub rounds_on: u32,
    /// Rounds in a row its entry has shown a demand above 0.
    pub asking: u32,
    /// The demand it last wrote, and how many rounds ago.
    pub written: Option<(u64, u32)>,
    /// Leave at the next round.
    pub leave: bool,
    /// The last reply showed no other region's demand: the size of this instance's demand then
    /// moves no target (alone, a region's target is all it can hold whatever it asks), so only
    /// its end is worth a write.
    pub alone: bool,
    /// The hits and seconds of its last [`DEMAND_ROUNDS`] rounds, oldest first overwritten.
    recent: [(u64, f64); DEMAND_ROUNDS],
    /// Rounds recorded so far.
    rounds: usize,
}

/// Rounds a demand is measured over: a key asked less than once a round still shows a steady
/// demand, instead of one that comes and goes (and a post and a leave each time).
pub(super) const DEMAND_ROUNDS: usize = 8;

impl Standing {
    /// Records this round's `hits` over `secs`; the demand in requests per second over the last
    /// [`DEMAND_ROUNDS`] rounds.
    pub(super) fn demand(&mut self, hits: u64, secs: f64) -> f64 {
        self.recent[self.rounds % DEMAND_ROUNDS] = (hits, secs);
        self.rounds = self.rounds.saturating_add(1);
        let seen = &self.recent[..self.rounds.min(DEMAND_ROUNDS)];
        let (hits, secs) = (seen.iter()).fold((0, 0.0), |(h, s), r| (h + r.0, s + r.1));
        hits as f64 / f64::max(secs, 0.001)
    }

    /// What to do on the key's own board this round, with a demand of `milli` thousandths and
    /// entries living `ttl_rounds` rounds.
    pub(super) fn mode(
        &self,
        k: &DemandRound,
        milli: u64,
        per_second: f64,
        ttl_rounds: u32,
    ) -> BoardMode {
        if self.leave {
            return BoardMode::Leave;
        }
        if self.rounds_on > 0 {
            // Alone on the board, a demand that stopped leaves at once instead of posting 0 first
            // (what the round after would have done).
            if self.alone && milli == 0 {
                return BoardMode::Leave;
            }
            return match self.written {
                // Within an eighth of what is on the board, or any demand while alone: not
                // worth a write.
                Some((w, age))
                    if age < ttl_rounds / 2
                        && (w.abs_diff(milli) <= w / 8 || (self.alone && w > 0)) =>
                {
                    BoardMode::Read
                }
                _ => BoardMode::Post,
            };
        }
        let floor = k.regions.follow.map_or(0.0, |f| f.floor);
        let room = k.share < share::alone(floor, k.regions.shares.len()) - 1e-9;
        if room && share::presses(per_second, k.share, k.rate) {
            BoardMode::Post
        } else {
            BoardMode::PostIfContested
        }
    }

    /// Takes this round's `reply` (boards of the key's listed regions, whose `presence` is
    /// given, this instance `member` of region `me`, having asked `milli`): the key's next share,
    /// or `None` to keep the one in force.
    pub(super) fn settle(
        &mut self,
        k: &DemandRound,
        (me, member, milli): (usize, u64, u64),
        reply: &BoardReply,
        presence: &[&Presence],
    ) -> Option<f64> {
        let follow = k.regions.follow?;
        self.written = match (reply.posted, self.written) {
            (true, _) => Some((milli, 0)),
            (false, Some((w, age))) => Some((w, age.saturating_add(1))),
            (false, None) => None,
        };
        let mine = (reply.regions.get(me)).and_then(|e| e.iter().find(|(m, _)| *m == member));
        let Some(&(_, asked)) = mine else {
            *self = Standing {
                recent: self.recent,
                rounds: self.rounds,
                ..Standing::default()
            };
            return None;
        };
        self.rounds_on = self.rounds_on.saturating_add(1);
        self.asking = if asked > 0 {
            self.asking.saturating_add(1)
        } else {
            0
        };
        let demands: Vec<f64> = (reply.regions.iter().zip(presence))
            .map(|(entries, p)| p.demand(entries) as f64 / 1000.0)
            .collect();
        let others: f64 = (demands.iter().enumerate())
            .filter(|(j, _)| *j != me)
            .map(|(_, d)| d)
            .sum();
        let hidden = (reply.regions.iter().zip(presence).enumerate())
            .any(|(j, (e, p))| j != me && e.is_empty() && **p == Presence::CutOff);
        let target = share::demand_shares(&demands, follow.floor)[me];
        let mut next = share::step_own(k.share, target, follow.max_step, demands.len());
        if next > k.share && (self.asking < RISE_AFTER || hidden) {
            next = k.share;
        }
        let full = next >= share::alone(follow.floor, demands.len()) - 1e-9;
        // The region's demand with this instance's as it is now: alone, what it last wrote may
        // be a larger demand, fading since.
        let region_now = demands[me] - asked as f64 / 1000.0 + milli as f64 / 1000.0;
        self.alone = others <= 0.0;
        self.leave = self.alone && (full || !share::presses(region_now, next, k.rate));
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};
    use std::sync::Arc;

    use super::*;
    use crate::region::{FollowDemand, Regions};

    fn key(share: f64) -> DemandRound {
        let shares: BTreeMap<String, f64> = [("eu".into(), 0.5), ("us".into(), 0.5)].into();
        let regions = Regions {
            path: "r".into(),
            shares,
            default_share: 0.0,
            follow: Some(FollowDemand {
                floor: 0.1,
                max_step: 0.1,
            }),
        };
        DemandRound {
            key: "k".into(),
            regions: Arc::new(regions),
            rate: 10.0,
            hits: 0,
            share,
        }
    }

    fn reply(posted: bool, eu: &[(u64, u64)], us: &[(u64, u64)]) -> BoardReply {
        BoardReply {
            posted,
            regions: vec![eu.to_vec(), us.to_vec()],
        }
    }

    /// eu alone: it posts while it climbs (after the rounds every other region needs to see it),
    /// leaves at the top and then writes nothing; us shows up and eu posts again and gives way.
    #[test]
    fn a_key_used_in_one_region_stops_costing_writes_once_its_share_is_whole() {
        let live = Presence::Live(HashSet::from([7, 8]));
        let both = [&live, &live];
        let (mut s, mut share) = (Standing::default(), 0.1);
        // 10 a second asked against a budget of 1: pressed.
        assert_eq!(s.mode(&key(share), 10_000, 10.0, 30), BoardMode::Post);
        let mut climbed = Vec::new();
        for _ in 0..12 {
            let k = key(share);
            let mode = s.mode(&k, 10_000, 10.0, 30);
            if mode == BoardMode::Leave {
                break;
            }
            let posted = mode == BoardMode::Post;
            let r = reply(posted, &[(7, 10_000)], &[]);
            share = s.settle(&k, (0, 7, 10_000), &r, &both).unwrap_or(share);
            climbed.push(share);
        }
        assert_eq!(
            &climbed[..2],
            &[0.1, 0.1],
            "no rise in its first two rounds"
        );
        assert!((share - 0.9).abs() < 1e-9, "{climbed:?}");
        // It leaves: off the board, its share stays; from then on it only asks whether the key
        // is contested, which writes nothing while it is not.
        let k = key(share);
        for mode in [BoardMode::Leave, BoardMode::PostIfContested] {
            assert_eq!(s.mode(&k, 10_000, 10.0, 30), mode);
            let r = reply(false, &[], &[]);
            assert_eq!(s.settle(&k, (0, 7, 10_000), &r, &both), None);
        }
        // us posts: the script posts eu's demand in the same call, and eu's share falls.
        let r = reply(true, &[(7, 10_000)], &[(8, 30_000)]);
        let next = s.settle(&k, (0, 7, 10_000), &r, &both).unwrap();
        assert!((next - 0.8).abs() < 1e-9, "{next}");
        assert!(!s.leave);
    }

    /// A region cut off as a whole that shows nothing on the board may hold a share unseen: no
    /// rise while it is away; a live region that shows nothing is idle.
    #[test]
    fn no_rise_while_a_cut_off_region_shows_nothing() {
        let live = Presence::Live(HashSet::from([7]));
        let mut s = Standing {
            rounds_on: RISE_AFTER,
            asking: RISE_AFTER,
            ..Standing::default()
        };
        let r = reply(true, &[(7, 10_000)], &[]);
        let k = key(0.3);
        let away = [&live, &Presence::CutOff];
        assert_eq!(s.settle(&k, (0, 7, 10_000), &r, &away), Some(0.3));
        let here = [&live, &live];
        assert_eq!(s.settle(&k, (0, 7, 10_000), &r, &here), Some(0.4));
    }

    /// us held 0.9 and left the board (eu asked for nothing); the board is empty of demand, which
    /// would split equally, but eu asks for nothing itself and keeps its floor; when it asks
    /// again it waits its rounds, so us (reading every round) is back on the board first.
    #[test]
    fn a_share_rises_only_after_its_own_demand_has_shown_for_the_rounds() {
        let live = Presence::Live(HashSet::from([7, 8]));
        let both = [&live, &live];
        let mut s = Standing {
            rounds_on: 10,
            asking: 0,
            ..Standing::default()
        };
        let k = key(0.1);
        let idle = reply(false, &[(7, 0)], &[]);
        assert_eq!(s.settle(&k, (0, 7, 0), &idle, &both), Some(0.1));
        let asks = reply(true, &[(7, 5_000)], &[]);
        for _ in 1..RISE_AFTER {
            assert_eq!(s.settle(&k, (0, 7, 5_000), &asks, &both), Some(0.1));
        }
        let next = s.settle(&k, (0, 7, 5_000), &asks, &both).unwrap();
        assert!((next - 0.2).abs() < 1e-9, "{next}");
    }

    /// A key asked once every four rounds of a second shows a quarter of a request a second in
    /// every round, not 1 and 0 by turns.
    #[test]
    fn demand_is_measured_over_the_last_rounds() {
        let mut s = Standing::default();
        let got: Vec<f64> = (0..12)
            .map(|i| s.demand(u64::from(i % 4 == 3), 1.0))
            .collect();
        assert_eq!(&got[..4], &[0.0, 0.0, 0.0, 0.25]);
        assert!(got[7..].iter().all(|d| (d - 0.25).abs() < 1e-9), "{got:?}");
        assert_eq!(Standing::default().demand(30, 10.0), 3.0);
    }
}
