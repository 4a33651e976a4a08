//! The fleet store: the embedded memory store with the peers' counts added to each window
//! decision. An op of a shared algorithm runs on the local memory store against the limit left
//! over once this side's share is reduced by what the live peers used (so `over_limit` and
//! `remaining` judge the fleet's total), and its decision reports the fleet's usage; the local
//! count is then recorded for publication. Other algorithms never reach it (the configuration is
//! refused), and would be decided locally only.

use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;

use super::tally::Tally;
use super::view::View;
use ratelimitd_core::algorithm::fixed_window::window_start;
use ratelimitd_core::algorithm::{Algorithm, Decision};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::memory::MemoryStore;
use ratelimitd_core::store::{Answer, Op, PrefixReset, ResetError, Store, StoreError};

/// The embedded store of one fleet member.
#[derive(Debug)]
pub(crate) struct FleetStore {
    memory: Arc<MemoryStore>,
    tally: Arc<Tally>,
    view: Arc<ArcSwap<View>>,
}

impl FleetStore {
    /// A store deciding on `memory`, publishing into `tally`, reading the peers from `view`.
    pub(crate) fn new(
        memory: Arc<MemoryStore>,
        tally: Arc<Tally>,
        view: Arc<ArcSwap<View>>,
    ) -> FleetStore {
        FleetStore {
            memory,
            tally,
            view,
        }
    }

    /// Records what `op` changed in this instance's count of its window.
    fn record(&self, op: &Op, local: &Decision, now: Timestamp) {
        if op.hits == 0 {
            return;
        }
        let start = window_start(op.spec.window, now);
        let hits = op.hits;
        match op.spec.algorithm {
            // A fixed window's local counter is the decision's `after` (refunds included).
            Algorithm::FixedWindow => {
                let after = local.after;
                self.tally
                    .update(&op.key, op.spec.window, start, |c| c.current = after);
            }
            // A sliding window counts admitted hits only.
            Algorithm::SlidingWindow if op.refund => {
                self.tally.update(&op.key, op.spec.window, start, |c| {
                    c.current = c.current.saturating_sub(hits);
                });
            }
            Algorithm::SlidingWindow if !local.over_limit => {
                self.tally.update(&op.key, op.spec.window, start, |c| {
                    c.current = c.current.saturating_add(hits);
                });
            }
            _ => {}
        }
    }
}

#[async_trait]
impl Store for FleetStore {
    async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError> {
        let view = self.view.load();
        let mut used = Vec::with_capacity(ops.len());
        let local_ops: Vec<Op> = ops
            .iter()
            .map(|op| {
                let mut op = op.clone();
                let peers = if View::shares(op.spec.algorithm) {
                    let peers = view.used_by_peers(&op.key, &op.spec, now);
                    op.spec.limit = view.share(op.spec.limit).saturating_sub(peers);
                    peers
                } else {
                    0
                };
                used.push(peers);
                op
            })
            .collect();
        let answers = self.memory.apply(&local_ops, now).await?;
        Ok(answers
            .into_iter()
            .zip(ops.iter().zip(used))
            .map(|(answer, (op, peers))| match answer {
                Answer::Decided(local) if View::shares(op.spec.algorithm) => {
                    self.record(op, &local, now);
                    Answer::Decided(Decision {
                        before: local.before.saturating_add(peers),
                        after: local.after.saturating_add(peers),
                        ..local
                    })
                }
                other => other,
            })
            .collect())
    }

    /// Resets this member's count of each key (the memory store, and the count it publishes to
    /// the peers, set to zero); the peers' own counts of the key stay theirs.
    async fn reset(&self, ops: &[Op], now: Timestamp) -> Result<u64, StoreError> {
        for op in ops.iter().filter(|op| View::shares(op.spec.algorithm)) {
            let start = window_start(op.spec.window, now);
            self.tally.update(&op.key, op.spec.window, start, |c| {
                c.current = 0;
                c.previous = 0;
            });
        }
        self.memory.reset(ops, now).await
    }

    /// Refused, as by the memory store it decides on.
    async fn reset_prefix(
        &self,
        prefix: &str,
        max_keys: usize,
        now: Timestamp,
    ) -> Result<PrefixReset, ResetError> {
        self.memory.reset_prefix(prefix, max_keys, now).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::tally::{Published, decode};
    use ratelimitd_core::algorithm::sliding_window::SlidingWindowState;
    use ratelimitd_core::algorithm::{LimitSpec, Window};

    fn op(algorithm: Algorithm, limit: u64, hits: u64) -> Op {
        let window = Window::from_secs(60).unwrap();
        let spec = LimitSpec {
            algorithm,
            limit,
            window,
            burst: 0,
        };
        Op::new("k", spec, hits)
    }

    fn store(view: View) -> (FleetStore, Arc<Tally>) {
        let tally = Arc::new(Tally::new(16));
        let view = Arc::new(ArcSwap::from_pointee(view));
        let memory = Arc::new(MemoryStore::new(100));
        (FleetStore::new(memory, tally.clone(), view), tally)
    }

    fn peer(current: u64) -> Published {
        Published {
            window_secs: 60,
            counts: SlidingWindowState {
                window_start: 120,
                current,
                previous: 0,
            },
        }
    }

    async fn decide(s: &FleetStore, op: &Op, now: Timestamp) -> Decision {
        *s.apply(std::slice::from_ref(op), now).await.unwrap()[0]
            .decision()
            .unwrap()
    }

    #[tokio::test]
    async fn peers_counts_take_their_part_of_the_limit() {
        let mut view = View::default();
        view.counts.insert("k".into(), vec![peer(6), peer(2)]);
        let (s, tally) = store(view);
        let now = Timestamp::from_secs(130);
        let d = decide(&s, &op(Algorithm::FixedWindow, 10, 2), now).await;
        assert!(!d.over_limit);
        assert_eq!((d.before, d.after, d.remaining), (8, 10, 0));
        let d = decide(&s, &op(Algorithm::FixedWindow, 10, 1), now).await;
        assert!(d.over_limit, "the fleet's eleventh hit is over: {d:?}");
        let writes = tally.drain(now);
        let (_, p) = decode(writes[0].1.as_deref().unwrap()).unwrap();
        assert_eq!(
            p.counts.current, 3,
            "the local count is published, not the fleet's"
        );
    }

    #[tokio::test]
    async fn a_partitioned_side_keeps_its_membership_share() {
        let view = View {
            live: 1,
            known: 3,
            ..View::default()
        };
        let (s, _) = store(view);
        let now = Timestamp::from_secs(130);
        let admitted = {
            let mut n = 0;
            for _ in 0..30 {
                if !decide(&s, &op(Algorithm::SlidingWindow, 30, 1), now)
                    .await
                    .over_limit
                {
                    n += 1;
                }
            }
            n
        };
        assert_eq!(admitted, 10);
    }
}
