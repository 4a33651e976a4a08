//! What this instance knows of the fleet, rebuilt once per gossip round and read lock-free by
//! every decision: the live and known member counts (the limit's split) and the live peers'
//! published counts per key. A decision never waits on the network: it reads the last view.

use std::collections::HashMap;

use ratelimitd_core::algorithm::fixed_window::window_start;
use ratelimitd_core::algorithm::sliding_window::{SCALE, previous_weight, roll};
use ratelimitd_core::algorithm::{Algorithm, LimitSpec};
use ratelimitd_core::clock::Timestamp;

use super::tally::Published;

/// One gossip round's picture of the fleet.
#[derive(Debug, Clone)]
pub(crate) struct View {
    /// Members alive now, this one included (distinct instances, whatever their restarts).
    pub live: u64,
    /// Members known: alive, or stopped answering less than `FLEET_FORGET_AFTER` ago.
    pub known: u64,
    /// The live peers' published counts, per key (one item per peer that published it).
    pub counts: HashMap<String, Vec<Published>>,
}

impl Default for View {
    fn default() -> View {
        View {
            live: 1,
            known: 1,
            counts: HashMap::new(),
        }
    }
}

impl View {
    /// True when the fleet shares this algorithm's counts.
    pub(crate) fn shares(algorithm: Algorithm) -> bool {
        matches!(algorithm, Algorithm::FixedWindow | Algorithm::SlidingWindow)
    }

    /// This side's part of `limit`: all of it while every known member is alive, else
    /// `limit × live / known` rounded down and at least 1 (a partition's or a crash's share).
    pub(crate) fn share(&self, limit: u64) -> u64 {
        if self.live >= self.known {
            return limit;
        }
        ratelimitd_core::limiter::fallback::scaled(limit, self.live as f64 / self.known as f64)
    }

    /// How much of `key`'s limit the live peers used at `now`, as `spec`'s algorithm judges it:
    /// their counts of the current window (fixed), or the current count plus the previous
    /// window's weighted by its overlap, rounded up (sliding).
    pub(crate) fn used_by_peers(&self, key: &str, spec: &LimitSpec, now: Timestamp) -> u64 {
        let Some(published) = self.counts.get(key) else {
            return 0;
        };
        let start = window_start(spec.window, now);
        let weight = u128::from(previous_weight(spec.window, now));
        published
            .iter()
            .filter(|p| p.window_secs == spec.window.secs())
            .map(|p| {
                let mut c = p.counts;
                roll(&mut c, start, spec.window);
                match spec.algorithm {
                    Algorithm::SlidingWindow => {
                        let previous =
                            (u128::from(c.previous) * weight).div_ceil(u128::from(SCALE));
                        (previous as u64).saturating_add(c.current)
                    }
                    _ => c.current,
                }
            })
            .fold(0u64, u64::saturating_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::algorithm::Window;
    use ratelimitd_core::algorithm::sliding_window::SlidingWindowState;

    fn spec(algorithm: Algorithm) -> LimitSpec {
        LimitSpec {
            algorithm,
            limit: 100,
            window: Window::from_secs(60).unwrap(),
            burst: 0,
        }
    }

    fn published(window_start: u64, current: u64, previous: u64) -> Published {
        Published {
            window_secs: 60,
            counts: SlidingWindowState {
                window_start,
                current,
                previous,
            },
        }
    }

    #[test]
    fn peers_count_in_the_current_window_only() {
        let mut v = View::default();
        v.counts.insert(
            "k".into(),
            vec![
                published(120, 7, 0),
                published(60, 50, 0),
                published(120, 3, 9),
            ],
        );
        let now = Timestamp::from_secs(150);
        assert_eq!(v.used_by_peers("k", &spec(Algorithm::FixedWindow), now), 10);
        assert_eq!(
            v.used_by_peers("other", &spec(Algorithm::FixedWindow), now),
            0
        );
        // Sliding: half of the previous window still overlaps at 150 s: 7 + 3 + ⌈(50 + 9) / 2⌉.
        assert_eq!(
            v.used_by_peers("k", &spec(Algorithm::SlidingWindow), now),
            40
        );
    }

    #[test]
    fn the_limit_splits_by_live_over_known_members() {
        let mut v = View::default();
        assert_eq!(v.share(90), 90);
        (v.live, v.known) = (2, 3);
        assert_eq!(v.share(90), 60);
        (v.live, v.known) = (1, 3);
        assert_eq!((v.share(90), v.share(2)), (30, 1));
    }
}
