//! One gossip round: publish this instance's changed counts into its chitchat state, then
//! rebuild the view of the fleet from the peers' states — who is alive, who is known (the
//! limit's split), their published counts — and the figures the fleet reports.
//!
//! A member that shuts down sets [`LEAVING`] in its own state before it stops gossiping (see
//! `wiring`); chitchat carries it like any other key. A member whose state says it is leaving is
//! neither alive nor known from then on, so the others take back its part of the limit at once
//! instead of splitting it until `FLEET_FORGET_AFTER`; the counts it published for the current
//! window still weigh on decisions (they were real hits) until the window is over.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use arc_swap::ArcSwap;
use chitchat::{Chitchat, ChitchatId, Heartbeat};

use super::estimate::Estimate;
use super::tally::{Tally, decode};
use super::view::View;
use super::wiring::FleetStats;
use ratelimitd_core::clock::{Clock, Stopwatch};

/// Prefix of the gossip keys holding published counts (`s<slot>`).
pub(super) const SLOT_PREFIX: &str = "s";

/// The gossip key a member sets in its own state when it shuts down.
pub(super) const LEAVING: &str = "leaving";

/// What one gossip round reads and writes.
pub(super) struct Round {
    pub tally: Arc<Tally>,
    pub view: Arc<ArcSwap<View>>,
    pub stats: Arc<FleetStats>,
    pub clock: Arc<dyn Clock>,
    pub max_keys: usize,
    pub interval: Duration,
    /// Each live peer's last heartbeat, and when it last moved (on `since`). A peer beats once
    /// per round and its counts travel with its heartbeat, so the time since the beat moved is
    /// how old its counts are here.
    pub seen: HashMap<ChitchatId, (Heartbeat, Duration)>,
    /// The monotonic time the gossip age and the peers' rates are measured on.
    pub since: Stopwatch,
    /// The peers' rates of hits, for the estimated error.
    pub estimate: Estimate<ChitchatId>,
}

impl Round {
    /// Publishes the changed counts, then rebuilds the view from the peers' states.
    pub(super) fn run(&mut self, c: &mut Chitchat) {
        let me = c.self_node_state();
        for (slot, value) in self.tally.drain(self.clock.now()) {
            me.set(format!("{SLOT_PREFIX}{slot}"), value.unwrap_or_default());
        }
        let self_id = c.self_chitchat_id().clone();
        let leaving: HashSet<&ChitchatId> = c
            .node_states()
            .iter()
            .filter(|(_, s)| s.contains_key(LEAVING))
            .map(|(id, _)| id)
            .collect();
        let peers: Vec<ChitchatId> = c
            .live_nodes()
            .filter(|id| id.node_id != self_id.node_id && !leaving.contains(id))
            .cloned()
            .collect();
        let live: HashSet<&str> = peers
            .iter()
            .map(|id| &*id.node_id)
            .chain(std::iter::once(&*self_id.node_id))
            .collect();
        let known: HashSet<&str> = c
            .node_states()
            .keys()
            .filter(|id| !leaving.contains(id))
            .map(|id| &*id.node_id)
            .chain(live.iter().copied())
            .collect();
        let mut view = View {
            live: live.len() as u64,
            known: known.len() as u64,
            counts: HashMap::new(),
        };
        let now = self.since.elapsed();
        let oldest = self.oldest_beat(c, &peers, now);
        // The live peers' counts, and those a member published before it left (another
        // generation of this instance's address included: they are hits this life lost).
        let readable = c
            .node_states()
            .iter()
            .filter(|(id, _)| **id != self_id && (leaving.contains(id) || peers.contains(id)));
        let mut read = Vec::new();
        for (id, state) in readable {
            // A peer publishes at most its own cap; more than ours is read up to ours.
            for (_, value) in state.iter_prefix(SLOT_PREFIX).take(self.max_keys) {
                if let Some((key, published)) = decode(&value.value) {
                    view.counts
                        .entry(key.to_string())
                        .or_default()
                        .push(published);
                    read.push((id, key, published));
                }
            }
        }
        let keys = read.len() as u64;
        self.estimate.observe(now, read);
        self.seen.retain(|id, _| peers.contains(id));
        self.record(c, &view, (oldest, keys));
        self.view.store(Arc::new(view));
    }

    /// Notes each live peer's heartbeat at `now` when it moved; how long ago the stalest one
    /// moved, which is how old its counts are here.
    fn oldest_beat(&mut self, c: &Chitchat, peers: &[ChitchatId], now: Duration) -> Duration {
        let mut oldest = Duration::ZERO;
        for id in peers {
            let Some(state) = c.node_state(id) else {
                continue;
            };
            let beat = state.heartbeat();
            let entry = self.seen.entry(id.clone()).or_insert((beat, now));
            if entry.0 != beat {
                *entry = (beat, now);
            }
            oldest = oldest.max(now.saturating_sub(entry.1));
        }
        oldest
    }

    /// The round's figures for the metrics and the status page: the members, the gossip's age
    /// (`oldest`), the peers' `keys` read, the cluster state's size and the estimated error.
    fn record(&self, c: &Chitchat, view: &View, (oldest, keys): (Duration, u64)) {
        let entries: usize = c
            .node_states()
            .values()
            .map(chitchat::NodeState::num_key_values)
            .sum();
        let s = &self.stats;
        s.peers_alive.store(view.live - 1, Ordering::Relaxed);
        s.members_known.store(view.known, Ordering::Relaxed);
        s.gossip_age_ms
            .store(oldest.as_millis() as u64, Ordering::Relaxed);
        s.peer_keys.store(keys, Ordering::Relaxed);
        s.states
            .store(c.node_states().len() as u64, Ordering::Relaxed);
        s.entries.store(entries as u64, Ordering::Relaxed);
        let error = self.estimate.over_admission(oldest, self.interval);
        s.estimated_error.store(error.to_bits(), Ordering::Relaxed);
    }
}
