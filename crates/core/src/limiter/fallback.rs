//! The local fallback (`failure_mode: local`): while the store cannot answer an op, its limit is
//! enforced by a memory store inside this process — same algorithm, same key, same window — on
//! this instance's share of the limit, so a fleet of K instances in fallback admits about the
//! whole limit, not K times it. The share is the limit's `local_share`, else one over the
//! instances last seen alive through the store ([`Instances`]); the scaled limit is never below
//! one hit. The counts are dropped once the store answers again ([`LocalFallback::forget`]): a
//! window that spans the outage starts over in the store with what the store had counted.
//! This is the one producer of [`Source::LocalFallback`] outcomes.

use std::sync::Arc;

use super::outcome::{Outcome, Source, Verdict};
use crate::clock::Timestamp;
use crate::config::Limit;
use crate::resilience::Instances;
use crate::store::memory::MemoryStore;
use crate::store::{Op, Store, StoreError};

/// Keys the fallback tracks at most; beyond that new keys fail as the memory store does.
const MAX_KEYS: usize = 100_000;

/// The in-process limits used while the store is down.
#[derive(Debug)]
pub struct LocalFallback {
    memory: MemoryStore,
    instances: Arc<Instances>,
}

impl Default for LocalFallback {
    fn default() -> LocalFallback {
        LocalFallback::new(Arc::new(Instances::default()))
    }
}

impl LocalFallback {
    /// A fallback dividing limits by the live count in `instances`.
    pub fn new(instances: Arc<Instances>) -> LocalFallback {
        LocalFallback {
            memory: MemoryStore::new(MAX_KEYS),
            instances,
        }
    }

    /// The live-instance count the share divides by.
    pub fn instances(&self) -> &Instances {
        &self.instances
    }

    /// This instance's share of `limit`: its `local_share`, else 1 / live instances.
    pub fn share(&self, limit: &Limit) -> f64 {
        limit
            .local_share
            .unwrap_or_else(|| 1.0 / self.instances.live() as f64)
    }

    /// Decides `op` of `limit` locally at `now` on this instance's share of it.
    pub async fn outcome(
        &self,
        op: &Op,
        limit: &Limit,
        now: Timestamp,
    ) -> Result<Outcome, StoreError> {
        let share = self.share(limit);
        let mut op = op.clone();
        op.spec.limit = scaled(op.spec.limit, share);
        op.spec.burst = scaled(op.spec.burst, share);
        let answer = self.memory.apply(std::slice::from_ref(&op), now).await?;
        let decision = answer.first().and_then(|a| a.decision().copied());
        let decision = decision
            .ok_or_else(|| StoreError::Unavailable("local fallback returned no decision".into()))?;
        Ok(Outcome {
            source: Source::LocalFallback,
            verdict: Some(Verdict::from(decision)),
        })
    }

    /// True when no local count is held.
    pub fn is_empty(&self) -> bool {
        self.memory.is_empty()
    }

    /// Drops every local count (the store answers again); returns how many keys were dropped.
    pub fn forget(&self) -> usize {
        self.memory.sweep_at(Timestamp::from_micros(u64::MAX))
    }
}

/// `n` scaled by `share`, rounded down, at least 1 (also the fleet mode's split of a limit).
pub fn scaled(n: u64, share: f64) -> u64 {
    ((n as f64) * share).floor().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn shares_round_down_but_never_below_one_hit() {
        assert_eq!(scaled(100, 1.0 / 3.0), 33);
        assert_eq!(scaled(2, 1.0 / 3.0), 1);
        assert_eq!(scaled(10, 0.25), 2);
        assert_eq!(scaled(7, 1.0), 7);
    }
}
