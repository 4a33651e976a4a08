//! Which instances of a region are alive, from the members hash each instance writes every round
//! (`lua/region_members.lua`). A region some instance of which ran a round within the last
//! [`FRESH_INTERVALS`] intervals is live, and only its fresh instances' demand entries count: an
//! instance that restarted comes back under a new identity, and its old entries stop counting two
//! intervals later instead of lingering until they expire. A region none of whose instances ran
//! a round that recently is cut off as a whole: its entries keep counting until its instances'
//! lease has run out ([`lapsed`]: [`super::LEASE_INTERVALS`] + 2 intervals after their last
//! round; each of them holds its floor by then), so the others do not take its share meanwhile.

use std::collections::HashSet;

/// Intervals within which an instance's last round makes it (and its region) live.
pub(super) const FRESH_INTERVALS: u64 = 2;

/// What the members hash says about one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Presence {
    /// Instances ran a round recently: these ones.
    Live(HashSet<u64>),
    /// Instances ran rounds, but none recently: the region cannot reach the global store. These
    /// ones ran none for longer than their lease ([`lapsed`]): their entries no longer count.
    CutOff(HashSet<u64>),
    /// No instance ran a round within the hold (or ever): the region is not there.
    Unseen,
}

impl Presence {
    /// The presence of a region whose instances last ran rounds at `members` (instance, ms), at
    /// `now_ms`, with rounds every `interval_ms`.
    pub(super) fn of(members: &[(u64, u64)], now_ms: u64, interval_ms: u64) -> Presence {
        if members.is_empty() {
            return Presence::Unseen;
        }
        let fresh_since = now_ms.saturating_sub(FRESH_INTERVALS * interval_ms);
        let fresh: HashSet<u64> = (members.iter())
            .filter(|(_, seen)| *seen >= fresh_since)
            .map(|(m, _)| *m)
            .collect();
        if fresh.is_empty() {
            Presence::CutOff(lapsed(members, now_ms, interval_ms).collect())
        } else {
            Presence::Live(fresh)
        }
    }

    /// The region's demand from its board `entries` (instance, demand): a live region's fresh
    /// instances only; every entry of a region cut off but those of lapsed instances; every
    /// entry of a region unseen.
    pub(super) fn demand(&self, entries: &[(u64, u64)]) -> u64 {
        let counts = |m: &u64| match self {
            Presence::Live(fresh) => fresh.contains(m),
            Presence::CutOff(lapsed) => !lapsed.contains(m),
            Presence::Unseen => true,
        };
        entries.iter().filter(|(m, _)| counts(m)).map(|e| e.1).sum()
    }
}

/// The instances among `members` (instance, last round in ms) that ran no round for longer than
/// an instance keeps its shares without one, and a margin of two intervals for late rounds and
/// clocks, at `now_ms`: they hold their floors, and their entries record no share any more.
pub(super) fn lapsed(
    members: &[(u64, u64)],
    now_ms: u64,
    interval_ms: u64,
) -> impl Iterator<Item = u64> + '_ {
    let lapse = u64::from(super::LEASE_INTERVALS + 2) * interval_ms;
    (members.iter())
        .filter(move |(_, seen)| seen.saturating_add(lapse) <= now_ms)
        .map(|(m, _)| *m)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use ratelimitd_core::clock::{Clock, ManualClock, Timestamp};

    /// An instance of us restarts under a new identity: its old entry stops counting two
    /// intervals after its last round, while us as a whole stays live; when every instance of us
    /// falls silent (cut off), all its entries count again until they expire.
    #[test]
    fn a_restarted_instance_s_old_entry_stops_counting_and_a_cut_off_region_s_entries_hold() {
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let interval = Duration::from_secs(1);
        let ms = |c: &ManualClock| c.now().as_micros() / 1000;
        let (old, kept, new) = (1_u64, 2_u64, 3_u64);
        let board = [(old, 40_000), (kept, 10_000), (new, 5_000)];
        let mut members = vec![(old, ms(&clock)), (kept, ms(&clock))];
        let presence = |m: &[(u64, u64)], c: &ManualClock| Presence::of(m, ms(c), 1000);
        assert_eq!(presence(&members, &clock).demand(&board[..2]), 50_000);
        // `old` restarts as `new`; the others run a round every interval.
        for _ in 0..2 {
            clock.advance(interval);
            members.retain(|(m, _)| *m != kept && *m != new);
            members.extend([(kept, ms(&clock)), (new, ms(&clock))]);
            assert_eq!(
                presence(&members, &clock).demand(&board),
                55_000,
                "still within two intervals of its last round"
            );
        }
        clock.advance(interval);
        members.retain(|(m, _)| *m == old);
        members.extend([(kept, ms(&clock)), (new, ms(&clock))]);
        assert_eq!(presence(&members, &clock).demand(&board), 15_000);
        // Now us is cut off: nobody runs a round. Its entries are held whole.
        clock.advance(interval * 3);
        assert!(matches!(presence(&members, &clock), Presence::CutOff(_)));
        assert_eq!(presence(&members, &clock).demand(&board), 55_000);
        // Each until its lease has run out (and two intervals more): then it holds its floor,
        // and shows no demand. `old` ran its last round three intervals before the others.
        let lapse = crate::region::LEASE_INTERVALS + 2;
        clock.advance(interval * (lapse - 6));
        assert_eq!(presence(&members, &clock).demand(&board), 15_000);
        clock.advance(interval * 3);
        assert_eq!(presence(&members, &clock).demand(&board), 0);
        assert_eq!(Presence::of(&[], 0, 1000), Presence::Unseen);
    }
}
