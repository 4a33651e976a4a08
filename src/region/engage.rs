//! When one instance tells the global store about a key, and how it moves the key's share: the
//! rule that makes a key used in one region cost few writes there, and the hand-over that keeps
//! the shares in force at most the whole limit together.
//!
//! An instance is *on the board* of a key while it reads the key's boards every round. It starts
//! posting when its demand presses on its share ([`share::presses`]) and the share can still grow
//! (below [`share::alone`]), or as soon as another region's board (or another instance of its own
//! region) holds a demand for the key: an instance whose demand starts showing on a board
//! announces the key, every instance holding the key looks at its boards in the round it reads
//! the announcement, and the script posts in that same call. While on the board it writes only
//! when its demand changed, its share changed, or its entry is half-way to expiry.
//!
//! **The share an entry holds.** Every entry records the share its instance holds. A region may
//! enforce a share above its floor only while its entry records it: the others count every
//! region at the largest share its entries record (at least the floor), and a share rises only
//! through a post, which the global store grants atomically up to what the other regions' entries
//! leave of the whole ([`share::grant`]). A share that falls is lowered here at once and posted
//! at the next round: only then may another region rise into it. So the shares in force never
//! add up to more than 1, whatever order the instances' rounds come in.
//!
//! Only an instance on the board moves its share, from the demand every region sees on the board,
//! so all of them compute the same targets; a share asks to rise only after its instance's entry
//! has shown a demand above 0 for [`RISE_AFTER`] rounds, and the rise is granted at the next
//! post. Once no other region shows demand and its region holds all it can, or no longer presses,
//! the instance leaves the board: at its floor it removes its entry; above it the entry stays
//! (*parked*), keeps recording the share, and is rewritten only half-way to its expiry or when
//! another instance announces the key.

use super::members::Presence;
use crate::store::redis::region_demand::{BoardMode, BoardReply, BoardTurn};
use ratelimitd_core::region::share;
use ratelimitd_core::region::{DemandRound, FollowDemand};

/// Rounds an instance's entry shows a demand above 0 on the board before its share asks to rise
/// (this one included); the rise is granted at the next round's post, so a share moves in the
/// third round its demand shows: by then every instance holding a share of the key off the board
/// has read the announcement and joined, so the regions compute from the same demands.
pub(super) const RISE_AFTER: u32 = 2;

/// One instance's standing on one key's board, across rounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Standing {
    /// Rounds in a row its entry has been on the board.
    pub rounds_on: u32,
    /// Rounds in a row its entry has shown a demand above 0.
    pub asking: u32,
    /// The demand it last wrote, and how many rounds ago.
    pub written: Option<(u64, u32)>,
    /// Leave the board: remove the entry at the floor, else post what is pending and park.
    pub leave: bool,
    /// The last reply showed no other region's demand: the size of this instance's demand then
    /// moves no target (alone, a region's target is all it can hold whatever it asks), so only
    /// its end is worth a write.
    pub alone: bool,
    /// The share its entry records (parts per million) and when it was written (ms): what the
    /// other regions count this instance at while the entry lives.
    pub posted: Option<(u64, u64)>,
    /// The share it asks for at its next post (parts per million), above the one it holds.
    pub want: Option<u64>,
    /// Its last post was granted less than it asked: another region's entry holds the rest,
    /// maybe parked and unaware of this demand, so the key is announced again.
    pub blocked: bool,
    /// The hits and seconds of its last [`DEMAND_ROUNDS`] rounds, oldest first overwritten.
    recent: [(u64, f64); DEMAND_ROUNDS],
    /// Rounds recorded so far.
    rounds: usize,
}

/// Rounds a demand is measured over: a key asked less than once a round still shows a steady
/// demand, instead of one that comes and goes (and a post and a leave each time).
pub(super) const DEMAND_ROUNDS: usize = 8;

/// A demand in requests per second as the board holds it: thousandths.
pub(super) fn milli(per_second: f64) -> u64 {
    (per_second.max(0.0) * 1000.0).round() as u64
}

/// A key's floor in parts per million.
fn floor_of(k: &DemandRound) -> u64 {
    k.regions.follow.map_or(0, |f| share::ppm(f.floor))
}

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

    /// Plans the round of `k` (its hits over `secs`, at `now_ms`, entries living `hold_ms`, or
    /// `ttl_rounds` rounds): this instance's demand in thousandths and what it does on its board.
    pub(super) fn plan(
        &mut self,
        k: &DemandRound,
        secs: f64,
        now_ms: u64,
        (hold_ms, ttl_rounds): (u64, u32),
    ) -> (u64, BoardMode) {
        let per_second = self.demand(k.hits, secs);
        let milli = milli(per_second);
        let post = self.must_post(k, now_ms, hold_ms);
        (milli, self.mode(k, (milli, per_second), ttl_rounds, post))
    }

    /// Whether a round planned as (`milli`, `mode`) announces the key: its demand starts showing
    /// on a board (or grows by more than an eighth on a parked entry), or its last rise was held
    /// back by another region's share, so every instance holding a share of the key off the
    /// board looks at it this round (and joins).
    pub(super) fn announces(&self, milli: u64, mode: BoardMode) -> bool {
        let starts =
            self.asking == 0 && (self.written).is_none_or(|(w, _)| w == 0 || milli > w + w / 8);
        mode == BoardMode::Post && milli > 0 && (starts || self.blocked)
    }

    /// Whether a round planned as `mode` calls the global store for the key: it writes, it is on
    /// the board, or another instance announced the key (`asked`).
    pub(super) fn calls(&self, mode: BoardMode, asked: bool) -> bool {
        mode != BoardMode::PostIfContested || self.rounds_on > 0 || asked
    }

    /// Whether the share of `k` needs a post at `now_ms`, entries living `hold_ms`: a rise is
    /// pending (only a post grants it), the share fell below what the entry records (the others
    /// may only take it once it shows), or a share above the floor has no entry recording it or
    /// one half-way to its expiry.
    pub(super) fn must_post(&self, k: &DemandRound, now_ms: u64, hold_ms: u64) -> bool {
        let held = share::ppm(k.share);
        if self.want.is_some_and(|w| w > held) {
            return true;
        }
        match self.posted {
            None => held > floor_of(k),
            Some((p, at)) => p != held || (held > floor_of(k) && now_ms >= at + hold_ms / 2),
        }
    }

    /// What to do on the key's own board this round, with a demand of `milli` thousandths,
    /// entries living `ttl_rounds` rounds, and `post` whether the share needs a post
    /// ([`Standing::must_post`]).
    pub(super) fn mode(
        &self,
        k: &DemandRound,
        (milli, per_second): (u64, f64),
        ttl_rounds: u32,
        post: bool,
    ) -> BoardMode {
        let at_floor = share::ppm(k.share) <= floor_of(k) && self.want.is_none();
        if self.leave {
            return if at_floor {
                BoardMode::Leave
            } else {
                BoardMode::Post
            };
        }
        if post {
            return BoardMode::Post;
        }
        if self.rounds_on > 0 {
            // Alone on the board, a demand that stopped leaves at once instead of posting 0
            // first (what the round after would have done); above the floor it posts its 0 and
            // parks.
            if self.alone && milli == 0 {
                return if at_floor {
                    BoardMode::Leave
                } else if self.written.is_some_and(|(w, _)| w == 0) {
                    BoardMode::Read
                } else {
                    BoardMode::Post
                };
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

    /// Takes this round's `reply` to `turn` (boards of the key's listed regions, whose
    /// `presence` is given, this instance `member` of region `me`, at `now_ms`): the key's next
    /// share, or `None` to keep the one in force.
    pub(super) fn settle(
        &mut self,
        k: &DemandRound,
        (me, member, now_ms): (usize, u64, u64),
        (turn, reply): (&BoardTurn, &BoardReply),
        presence: &[&Presence],
    ) -> Option<f64> {
        let follow = k.regions.follow?;
        let held = self.record_write(k, now_ms, (turn, reply));
        let mine = (reply.regions.get(me)).and_then(|e| e.iter().find(|(m, _)| *m == member));
        let Some(&(_, asked)) = mine else {
            *self = Standing {
                recent: self.recent,
                rounds: self.rounds,
                ..Standing::default()
            };
            return None;
        };
        let demands: Vec<f64> = (reply.regions.iter().zip(presence))
            .map(|(entries, p)| p.demand(entries) as f64 / 1000.0)
            .collect();
        let others: f64 = (demands.iter().enumerate())
            .filter(|(j, _)| *j != me)
            .map(|(_, d)| d)
            .sum();
        self.alone = others <= 0.0;
        // Leaving with a rise or a lowered share to post: posted, so park (or leave at the floor
        // next round) unless another region asks meanwhile.
        if self.leave && self.alone && reply.posted {
            self.leave = held <= share::ppm(follow.floor);
            if !self.leave {
                self.park();
            }
            return Some(share::from_ppm(held));
        }
        self.rounds_on = self.rounds_on.saturating_add(1);
        self.asking = if asked > 0 {
            self.asking.saturating_add(1)
        } else {
            0
        };
        Some(self.step(k, follow, (held, asked, turn.milli), (&demands, me)))
    }

    /// Records what this round wrote for the key: the entry's age, and what a post granted. What
    /// the instance holds now (ppm): a post grants at most what the others leave, and records at
    /// least what it held.
    fn record_write(
        &mut self,
        k: &DemandRound,
        now_ms: u64,
        (turn, reply): (&BoardTurn, &BoardReply),
    ) -> u64 {
        self.written = match (reply.posted, self.written) {
            (true, _) => Some((turn.milli, 0)),
            (false, Some((w, age))) => Some((w, age.saturating_add(1))),
            (false, None) => None,
        };
        let held = share::ppm(k.share);
        if !reply.posted {
            return held;
        }
        self.posted = Some((held.max(reply.granted), now_ms));
        self.blocked = reply.granted < turn.want;
        self.want = None;
        reply.granted
    }

    /// One step of the key's share from `held` (ppm) toward region `me`'s part of the
    /// `demands`, where this instance's entry asked `asked` and its demand is `milli` now (both
    /// thousandths). A fall takes effect now (rounded up to a whole part, never above what it
    /// held); a rise is asked for at the next post. Decides whether the key leaves the board or
    /// parks. The next share.
    fn step(
        &mut self,
        k: &DemandRound,
        follow: FollowDemand,
        (held, asked, milli): (u64, u64, u64),
        (demands, me): (&[f64], usize),
    ) -> f64 {
        // Alone and asking nothing, the region keeps what it holds (its target would be an
        // equal split of no demand).
        let target = if self.alone && demands[me] <= 0.0 {
            share::from_ppm(held)
        } else {
            share::demand_shares(demands, follow.floor)[me]
        };
        let step = share::step_own(
            share::from_ppm(held),
            target,
            follow.max_step,
            demands.len(),
        );
        let (next, want) = if step < share::from_ppm(held) {
            (share::ppm_up(step).min(held), None)
        } else {
            let want = share::ppm(step);
            (
                held,
                (want > held && self.asking >= RISE_AFTER).then_some(want),
            )
        };
        self.want = want;
        let after = share::from_ppm(want.unwrap_or(next));
        let full = after >= share::alone(follow.floor, demands.len()) - 1e-9;
        // The region's demand with this instance's as it is now: alone, what it last wrote may
        // be a larger demand, fading since.
        let region_now = demands[me] - asked as f64 / 1000.0 + milli as f64 / 1000.0;
        let leave = self.alone && (full || !share::presses(region_now, after, k.rate));
        let settled = want.is_none() && self.posted.is_some_and(|(p, _)| p == next);
        let floor = share::ppm(follow.floor);
        self.leave = leave && (next <= floor || !settled);
        if leave && next > floor && settled {
            self.park();
        }
        share::from_ppm(next)
    }

    /// Off the board with its entry kept: it records the share this instance holds; the key is
    /// called again when another instance announces it or the entry needs a post.
    fn park(&mut self) {
        self.rounds_on = 0;
        self.asking = 0;
        self.leave = false;
        self.want = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};
    use std::sync::Arc;

    use super::*;
    use ratelimitd_core::region::{FollowDemand, Regions};

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

    /// A turn of eu's instance 7 asking `milli` with `mode`, holding `k`'s share, asking for
    /// what its standing wants.
    fn turn(s: &Standing, k: &DemandRound, milli: u64, mode: BoardMode) -> BoardTurn {
        let held = share::ppm(k.share);
        BoardTurn {
            boards: Vec::new(),
            own: 0,
            milli,
            mode,
            held,
            want: s.want.unwrap_or(0).max(held),
            floor: 100_000,
        }
    }

    fn reply(posted: bool, granted: u64, eu: &[(u64, u64)], us: &[(u64, u64)]) -> BoardReply {
        BoardReply {
            posted,
            granted,
            regions: vec![eu.to_vec(), us.to_vec()],
        }
    }

    /// eu alone: it posts while it climbs (after the rounds every other region needs to see it),
    /// each rise granted by the post after it asked, parks at the top with its entry kept and
    /// then writes nothing until the entry is half-way to expiry; us shows up and eu gives way.
    #[test]
    fn a_key_used_in_one_region_parks_once_its_share_is_whole() {
        let live = Presence::Live(HashSet::from([7, 8]));
        let both = [&live, &live];
        let (mut s, mut share) = (Standing::default(), 0.1);
        let hold = 30_000;
        // 10 a second asked against a budget of 1: pressed.
        let mut climbed = Vec::new();
        let mut now = 0;
        for _ in 0..16 {
            now += 1000;
            let k = key(share);
            let post = s.must_post(&k, now, hold);
            let mode = s.mode(&k, (10_000, 10.0), 30, post);
            if !s.calls(mode, false) {
                break;
            }
            let t = turn(&s, &k, 10_000, mode);
            // Alone: every rise asked for is granted (up to us's floor).
            let granted = if mode == BoardMode::Post {
                t.want.min(900_000)
            } else {
                0
            };
            let r = reply(mode == BoardMode::Post, granted, &[(7, 10_000)], &[]);
            share = s.settle(&k, (0, 7, now), (&t, &r), &both).unwrap_or(share);
            climbed.push(share);
        }
        assert_eq!(
            &climbed[..3],
            &[0.1, 0.1, 0.2],
            "no rise in its first two rounds; the second asks, the third's post grants it"
        );
        assert!((share - 0.9).abs() < 1e-9, "{climbed:?}");
        assert_eq!(
            s.posted.map(|p| p.0),
            Some(900_000),
            "its entry records 0.9"
        );
        // Parked: no call while the entry lives, one post half-way to its expiry.
        let k = key(share);
        let (_, at) = s.posted.unwrap();
        assert!(!s.must_post(&k, at + hold / 2 - 1, hold));
        let mode = s.mode(&k, (10_000, 10.0), 30, false);
        assert_eq!(mode, BoardMode::PostIfContested);
        assert!(!s.calls(mode, false));
        assert!(s.must_post(&k, at + hold / 2, hold));
        // us posts and announces: eu reads the boards and gives way at once (it posts its lower
        // share at its next round, when us may take it).
        let t = turn(&s, &k, 10_000, mode);
        let r = reply(true, 900_000, &[(7, 10_000)], &[(8, 30_000)]);
        let next = s.settle(&k, (0, 7, now), (&t, &r), &both).unwrap();
        assert!((next - 0.8).abs() < 1e-9, "{next}");
        assert!(
            s.must_post(&key(next), now, hold),
            "the lower share is posted"
        );
        assert!(!s.leave);
    }

    /// A rise is granted only as far as the others' entries leave: the instance asks, the post
    /// grants less, and what it holds is what was granted.
    #[test]
    fn a_rise_is_held_only_as_far_as_it_is_granted() {
        let live = Presence::Live(HashSet::from([7, 8]));
        let both = [&live, &live];
        let mut s = Standing {
            rounds_on: RISE_AFTER,
            asking: RISE_AFTER,
            want: Some(600_000),
            posted: Some((500_000, 0)),
            ..Standing::default()
        };
        let k = key(0.5);
        assert!(s.must_post(&k, 1000, 30_000));
        let t = turn(&s, &k, 30_000, BoardMode::Post);
        assert_eq!(t.want, 600_000);
        // us still records 0.45: eu is granted 0.55.
        let r = reply(true, 550_000, &[(7, 30_000)], &[(8, 10_000)]);
        let next = s.settle(&k, (0, 7, 1000), (&t, &r), &both).unwrap();
        assert!((next - 0.55).abs() < 1e-9, "{next}");
        assert_eq!(s.posted, Some((550_000, 1000)));
        // A post granting less than it holds lowers it; its entry still records what it held.
        let mut s = Standing {
            rounds_on: 1,
            ..Standing::default()
        };
        let k = key(0.5);
        let t = turn(&s, &k, 30_000, BoardMode::Post);
        let r = reply(true, 200_000, &[(7, 30_000)], &[(8, 30_000)]);
        let next = s.settle(&k, (0, 7, 1000), (&t, &r), &both).unwrap();
        assert!(next <= 0.2 + 1e-9, "{next}");
        assert_eq!(s.posted, Some((500_000, 1000)));
        assert!(s.must_post(&key(next), 2000, 30_000));
    }

    /// us held 0.9 and left the board (eu asked for nothing); eu asks again and waits its
    /// rounds before it asks to rise.
    #[test]
    fn a_share_rises_only_after_its_own_demand_has_shown_for_the_rounds() {
        let live = Presence::Live(HashSet::from([7, 8]));
        let both = [&live, &live];
        let mut s = Standing {
            rounds_on: 10,
            asking: 0,
            posted: Some((100_000, 0)),
            ..Standing::default()
        };
        let k = key(0.1);
        let t = turn(&s, &k, 0, BoardMode::Read);
        let idle = reply(false, 0, &[(7, 0)], &[(8, 0)]);
        assert_eq!(s.settle(&k, (0, 7, 0), (&t, &idle), &both), Some(0.1));
        let asks = reply(false, 0, &[(7, 5_000)], &[(8, 0)]);
        for _ in 1..RISE_AFTER {
            assert_eq!(s.settle(&k, (0, 7, 0), (&t, &asks), &both), Some(0.1));
            assert_eq!(s.want, None);
        }
        assert_eq!(s.settle(&k, (0, 7, 0), (&t, &asks), &both), Some(0.1));
        assert_eq!(s.want, Some(200_000), "it asks at its next post");
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
