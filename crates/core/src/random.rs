//! The limiter's one source of randomness, injected like the [`crate::clock`]: soft limits draw a
//! uniform number per request ([`crate::config::Soft`]). Tests pass a [`SeededRandom`] with a fixed
//! seed so every draw, and so every soft decision, is reproducible; the server seeds one from the
//! process's hash keys. Nothing in this crate reads a thread-local generator.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of uniform numbers in `[0, 1)`, shared by every request.
pub trait Random: Send + Sync + Debug + 'static {
    /// The next uniform number in `[0, 1)`.
    fn unit(&self) -> f64;
}

/// SplitMix64 over one atomic counter: lock-free, and a seed fixes the whole sequence of draws.
/// Not for secrets; a soft limit only needs draws an attacker cannot steer, and the seed is
/// either fixed (tests) or random per process.
#[derive(Debug)]
pub struct SeededRandom {
    state: AtomicU64,
}

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SeededRandom {
    /// A source whose draws are fixed by `seed`.
    pub fn new(seed: u64) -> SeededRandom {
        SeededRandom {
            state: AtomicU64::new(seed),
        }
    }

    /// A source seeded from the process's random hash keys (different in every process).
    pub fn from_entropy() -> SeededRandom {
        SeededRandom::new(ahash::RandomState::new().hash_one(0x5eed_u64))
    }
}

impl Default for SeededRandom {
    fn default() -> SeededRandom {
        SeededRandom::from_entropy()
    }
}

impl Random for SeededRandom {
    fn unit(&self) -> f64 {
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits as a fraction: every value is an exact double below 1.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Always the same number: for a dry run (`/explain`, RLQS's look at a bucket's limit) that must
/// not move a seeded sequence; `Fixed(0.0)` judges a soft zone as its hard limit.
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub f64);

impl Random for Fixed {
    fn unit(&self) -> f64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_fixes_the_draws_and_they_stay_in_the_unit_interval() {
        let (a, b) = (SeededRandom::new(7), SeededRandom::new(7));
        let draws: Vec<f64> = (0..1000).map(|_| a.unit()).collect();
        assert!(draws.iter().all(|&u| (0.0..1.0).contains(&u)));
        assert_eq!(draws, (0..1000).map(|_| b.unit()).collect::<Vec<_>>());
        assert_ne!(draws[0], SeededRandom::new(8).unit());
    }

    #[test]
    fn draws_are_spread_evenly() {
        let r = SeededRandom::new(42);
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            buckets[(r.unit() * 10.0) as usize] += 1;
        }
        // 10 000 expected per tenth; a binomial sd is ~95, so ±500 is over 5 sd.
        assert!(
            buckets.iter().all(|&n| (9_500..=10_500).contains(&n)),
            "{buckets:?}"
        );
    }
}
