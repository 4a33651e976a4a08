//! The fleet mode's part of startup: binds the gossip socket (`FLEET_BIND` only), starts
//! chitchat with the seeds of `FLEET_PEERS`, wraps the memory store in a [`FleetStore`], and
//! runs the round that publishes this instance's changed counts and rebuilds the view of the
//! peers every `FLEET_GOSSIP_INTERVAL`, until shutdown.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use chitchat::{
    Chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig, Heartbeat,
};

use super::auth::{AuthCounts, SignedTransport};
use super::tally::{Tally, decode};
use super::view::View;
use super::{FleetOptions, FleetStore};
use crate::background::Background;
use crate::clock::{Clock, Stopwatch, SystemClock};
use crate::store::memory::MemoryStore;

/// Prefix of the gossip keys holding published counts (`s<slot>`).
const SLOT_PREFIX: &str = "s";

/// Why the fleet mode could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the fleet gossip on {bind} (FLEET_BIND): {reason}")]
pub struct FleetError {
    /// The address asked for.
    pub bind: String,
    /// What failed.
    pub reason: String,
}

/// What the fleet reports about itself (metrics, status page, logs).
#[derive(Debug, Default)]
pub struct FleetStats {
    /// Peers alive now (this instance not included).
    pub peers_alive: AtomicU64,
    /// Members known (alive or not yet forgotten), this instance included.
    pub members_known: AtomicU64,
    /// Milliseconds since the stalest live peer's state last changed here.
    pub gossip_age_ms: AtomicU64,
    /// Keys read from the peers in the last round.
    pub peer_keys: AtomicU64,
    /// Datagrams refused by authentication, messages too large to send.
    pub auth: Arc<AuthCounts>,
}

/// The started fleet mode.
#[derive(Debug)]
pub struct FleetHandle {
    /// The store the limiter decides on.
    pub store: Arc<FleetStore>,
    /// This instance's published counts (their number, the keys dropped at the cap).
    pub tally: Arc<Tally>,
    /// The last round's figures.
    pub stats: Arc<FleetStats>,
}

/// Starts gossip on `options.bind` and returns the store sharing `memory`'s counts; the gossip
/// round runs in `bg` until shutdown.
pub async fn start(
    options: &FleetOptions,
    memory: Arc<MemoryStore>,
    clock: Arc<dyn Clock>,
    mut bg: Background<'_>,
) -> Result<FleetHandle, FleetError> {
    let stats = Arc::new(FleetStats::default());
    let transport = SignedTransport::new(options.secret.0.as_bytes(), stats.auth.clone());
    // A new generation per start, so peers tell a restarted instance from its previous life:
    // the wall clock's microseconds (not the service clock, which a test may hold still).
    let generation = SystemClock.now().as_micros();
    let id = ChitchatId::new(options.advertise.to_string(), generation, options.advertise);
    let config = ChitchatConfig {
        chitchat_id: id,
        cluster_id: options.cluster.clone(),
        gossip_interval: options.interval,
        listen_addr: options.bind,
        seed_nodes: options.peers.clone(),
        failure_detector_config: FailureDetectorConfig {
            initial_interval: options.interval * 10,
            dead_node_grace_period: options.forget_after,
            ..FailureDetectorConfig::default()
        },
        marked_for_deletion_grace_period: options.forget_after,
        catchup_callback: None,
        extra_liveness_predicate: None,
    };
    let handle = chitchat::spawn_chitchat(config, Vec::new(), &transport)
        .await
        .map_err(|e| FleetError {
            bind: options.bind.to_string(),
            reason: format!("{e:#}"),
        })?;
    let tally = Arc::new(Tally::new(options.max_keys));
    let view = Arc::new(ArcSwap::from_pointee(View::default()));
    let store = Arc::new(FleetStore::new(memory, tally.clone(), view.clone()));
    let round = Round {
        tally: tally.clone(),
        view,
        stats: stats.clone(),
        clock,
        max_keys: options.max_keys,
        seen: HashMap::new(),
        since: Stopwatch::start(),
    };
    bg.spawn(run(handle, round, options.interval, bg.stopped()));
    tracing::info!(bind = %options.bind, peers = ?options.peers, "fleet gossip started");
    Ok(FleetHandle {
        store,
        tally,
        stats,
    })
}

/// What one gossip round reads and writes.
struct Round {
    tally: Arc<Tally>,
    view: Arc<ArcSwap<View>>,
    stats: Arc<FleetStats>,
    clock: Arc<dyn Clock>,
    max_keys: usize,
    /// Each live peer's last heartbeat, and when it last moved (on `since`). A peer beats once
    /// per round and its counts travel with its heartbeat, so the time since the beat moved is
    /// how old its counts are here.
    seen: HashMap<ChitchatId, (Heartbeat, Duration)>,
    /// The monotonic time the gossip age is measured on.
    since: Stopwatch,
}

/// Runs a round every `interval` until `stop`, then leaves the cluster's gossip.
async fn run(
    handle: ChitchatHandle,
    mut round: Round,
    interval: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tick.tick() => handle.with_chitchat(|c| round.run(c)).await,
        }
    }
    if let Err(e) = handle.shutdown().await {
        tracing::warn!(error = %e, "fleet gossip did not shut down cleanly");
    }
}

impl Round {
    /// Publishes the changed counts, then rebuilds the view from the live peers' states.
    fn run(&mut self, c: &mut Chitchat) {
        let me = c.self_node_state();
        for (slot, value) in self.tally.drain(self.clock.now()) {
            me.set(format!("{SLOT_PREFIX}{slot}"), value.unwrap_or_default());
        }
        let self_id = c.self_chitchat_id().clone();
        let live: HashSet<&str> = c.live_nodes().map(|id| &*id.node_id).collect();
        let known: HashSet<&str> = c
            .node_states()
            .keys()
            .map(|id| &*id.node_id)
            .chain(std::iter::once(&*self_id.node_id))
            .collect();
        let mut view = View {
            live: live.len() as u64,
            known: known.len() as u64,
            counts: HashMap::new(),
        };
        let now = self.since.elapsed();
        let mut oldest = Duration::ZERO;
        let mut keys = 0u64;
        let peers: Vec<ChitchatId> = c
            .live_nodes()
            .filter(|id| id.node_id != self_id.node_id)
            .cloned()
            .collect();
        for id in &peers {
            let Some(state) = c.node_state(id) else {
                continue;
            };
            let beat = state.heartbeat();
            let entry = self.seen.entry(id.clone()).or_insert((beat, now));
            if entry.0 != beat {
                *entry = (beat, now);
            }
            oldest = oldest.max(now - entry.1);
            // A peer publishes at most its own cap; more than ours is read up to ours.
            for (_, value) in state.iter_prefix(SLOT_PREFIX).take(self.max_keys) {
                if let Some((key, published)) = decode(&value.value) {
                    view.counts
                        .entry(key.to_string())
                        .or_default()
                        .push(published);
                    keys += 1;
                }
            }
        }
        self.seen.retain(|id, _| peers.contains(id));
        let s = &self.stats;
        s.peers_alive.store(view.live - 1, Ordering::Relaxed);
        s.members_known.store(view.known, Ordering::Relaxed);
        s.gossip_age_ms
            .store(oldest.as_millis() as u64, Ordering::Relaxed);
        s.peer_keys.store(keys, Ordering::Relaxed);
        self.view.store(Arc::new(view));
    }
}
