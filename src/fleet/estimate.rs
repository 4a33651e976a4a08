//! The fleet's estimated error, from what this instance can see. docs/fleet.md bounds the hits a
//! decision misses by the peers' hits of the last `D` (the age of their counts here): a key at
//! its limit may be admitted over it by about the peers' rate of hits on that key × `D`. The
//! peers' rate per key is read from the counts they publish (how much each grew between two
//! gossip rounds, smoothed), and `D` is the gossip age plus one interval (the publishing round
//! the age does not see). The figure reported is the busiest key's: the most hits any one limit
//! may currently be admitted over it here. Alone, or with idle peers, it is 0.
//!
//! Time is a parameter (each round passes its instant), so the estimate is tested without
//! waiting.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use super::tally::Published;

/// A key's peers' hits are considered no longer arriving below this rate (hits per second).
const IDLE_RATE: f64 = 0.01;

/// A peer's last published count of a key.
#[derive(Debug)]
struct Seen {
    /// Its window's start.
    start: u64,
    /// The count.
    count: u64,
    /// The round that read it.
    round: u64,
}

/// The smoothed rate of the live peers' hits per key; `P` names a peer (one life of it: a
/// restarted member's generations are different peers).
#[derive(Debug)]
pub(crate) struct Estimate<P> {
    /// Per peer, per key: the last window start and count seen, and the round that saw them.
    last: HashMap<P, HashMap<String, Seen>>,
    /// Rounds observed so far.
    round: u64,
    /// Per key: the peers' hits per second, smoothed over `smoothing`.
    rates: HashMap<String, f64>,
    /// The previous round's instant.
    at: Option<Duration>,
    /// The time constant of the smoothing: gossip delivers counts in bursts once per round, so
    /// the rate is averaged over several rounds.
    smoothing: Duration,
}

impl<P: Hash + Eq + Clone> Estimate<P> {
    /// An estimate for a fleet gossiping every `interval`: rates are smoothed over five
    /// intervals and at least a second.
    pub(crate) fn new(interval: Duration) -> Estimate<P> {
        Estimate {
            last: HashMap::new(),
            round: 0,
            rates: HashMap::new(),
            at: None,
            smoothing: (interval * 5).max(Duration::from_secs(1)),
        }
    }

    /// Takes one round's published counts at `now` (`(peer, key, counts)` of every peer read),
    /// and updates each key's rate with how much the counts grew since the previous round. A
    /// pair seen for the first time is a baseline, not a burst of hits; a count in a newer window
    /// grew by all of it; pairs not seen again are forgotten, so the state stays as small as the
    /// view. Only pairs seen for the first time allocate.
    pub(crate) fn observe<'a>(
        &mut self,
        now: Duration,
        counts: impl IntoIterator<Item = (&'a P, &'a str, Published)>,
    ) where
        P: 'a,
    {
        self.round += 1;
        let round = self.round;
        let mut grown: HashMap<&str, u64> = HashMap::new();
        for (peer, key, p) in counts {
            let (start, count) = (p.counts.window_start, p.counts.current);
            let keys = match self.last.get_mut(peer) {
                Some(keys) => keys,
                None => self.last.entry(peer.clone()).or_default(),
            };
            let delta = match keys.get_mut(key) {
                Some(seen) => {
                    let delta = match seen.start {
                        s if s == start => count.saturating_sub(seen.count),
                        s if s < start => count,
                        _ => 0,
                    };
                    *seen = Seen {
                        start,
                        count,
                        round,
                    };
                    delta
                }
                None => {
                    let seen = Seen {
                        start,
                        count,
                        round,
                    };
                    keys.insert(key.to_string(), seen);
                    0
                }
            };
            *grown.entry(key).or_default() += delta;
        }
        for keys in self.last.values_mut() {
            keys.retain(|_, seen| seen.round == round);
        }
        self.last.retain(|_, keys| !keys.is_empty());
        let Some(dt) = self.at.replace(now).and_then(|at| now.checked_sub(at)) else {
            return;
        };
        if dt.is_zero() {
            return;
        }
        let weight = 1.0 - (-dt.as_secs_f64() / self.smoothing.as_secs_f64()).exp();
        // Keys no peer published this round moved at 0 hits a second.
        for (key, rate) in &mut self.rates {
            let instant = grown.remove(key.as_str()).unwrap_or(0) as f64 / dt.as_secs_f64();
            *rate += (instant - *rate) * weight;
        }
        for (key, hits) in grown {
            self.rates
                .insert(key.to_string(), hits as f64 / dt.as_secs_f64() * weight);
        }
        self.rates.retain(|_, r| *r >= IDLE_RATE);
    }

    /// The busiest key's peers' hits per second.
    pub(crate) fn busiest_rate(&self) -> f64 {
        self.rates.values().copied().fold(0.0, f64::max)
    }

    /// The hits a key at its limit may be admitted over it here: the busiest key's peer rate
    /// × (`age` + `interval`).
    pub(crate) fn over_admission(&self, age: Duration, interval: Duration) -> f64 {
        self.busiest_rate() * (age + interval).as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratelimitd_core::algorithm::sliding_window::SlidingWindowState;

    const INTERVAL: Duration = Duration::from_millis(200);

    fn at(window_start: u64, current: u64) -> Published {
        Published {
            window_secs: 60,
            counts: SlidingWindowState {
                window_start,
                current,
                previous: 0,
            },
        }
    }

    /// Rounds every `INTERVAL` from `from` for `rounds`, each peer's count of `k` growing by
    /// `per_round`; returns the instant after the last.
    fn load(
        e: &mut Estimate<&'static str>,
        from: Duration,
        rounds: u64,
        peers: &[&'static str],
        per_round: u64,
    ) -> Duration {
        let mut now = from;
        for r in 0..rounds {
            let count = 10 + r * per_round;
            e.observe(now, peers.iter().map(|p| (p, "k", at(120, count))));
            now += INTERVAL;
        }
        now
    }

    #[test]
    fn zero_alone_or_idle() {
        let mut e = Estimate::new(INTERVAL);
        let mut now = Duration::ZERO;
        for _ in 0..10 {
            e.observe(now, std::iter::empty());
            now += INTERVAL;
        }
        assert_eq!(
            e.over_admission(Duration::from_secs(5), INTERVAL),
            0.0,
            "alone"
        );
        // Peers present with counts that do not move: idle.
        load(&mut e, now, 20, &["b", "c"], 0);
        assert_eq!(
            e.over_admission(Duration::from_secs(5), INTERVAL),
            0.0,
            "idle peers"
        );
    }

    #[test]
    fn rises_with_load_and_with_gossip_age() {
        let mut e = Estimate::new(INTERVAL);
        // Two peers, 4 hits a round each (20 hits/s each): 40 hits/s after the smoothing.
        let now = load(&mut e, Duration::ZERO, 50, &["b", "c"], 4);
        let rate = e.busiest_rate();
        assert!((38.0..=40.5).contains(&rate), "{rate}");
        let fresh = e.over_admission(Duration::ZERO, INTERVAL);
        let stale = e.over_admission(Duration::from_millis(800), INTERVAL);
        assert!((fresh - rate * 0.2).abs() < 1e-9, "{fresh}");
        assert!((stale - rate * 1.0).abs() < 1e-9, "{stale}");
        // The load stops: the estimate falls back to 0 within a few smoothing times.
        load(&mut e, now, 100, &["b", "c"], 0);
        assert_eq!(e.busiest_rate(), 0.0);
    }

    #[test]
    fn a_new_window_or_a_new_peer_is_not_a_burst() {
        let mut e = Estimate::new(INTERVAL);
        e.observe(Duration::ZERO, [(&"b", "k", at(120, 50))]);
        // A new peer arrives with 1000 hits already counted; b's window rolls over with 3 hits.
        e.observe(
            INTERVAL,
            [(&"b", "k", at(180, 3)), (&"c", "k", at(180, 1000))],
        );
        let weight = 1.0 - (-0.2f64).exp();
        let expected = 3.0 / 0.2 * weight;
        assert!(
            (e.busiest_rate() - expected).abs() < 1e-9,
            "{}",
            e.busiest_rate()
        );
    }
}
