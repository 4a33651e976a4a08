//! The fleet mode's part of startup: binds the gossip socket (`FLEET_BIND` only), starts
//! chitchat with the seeds of `FLEET_PEERS`, wraps the memory store in a [`FleetStore`], and
//! runs the round that publishes this instance's changed counts and rebuilds the view of the
//! peers every `FLEET_GOSSIP_INTERVAL`, until shutdown. At shutdown the member announces that it
//! is leaving in its own gossip state and keeps gossiping for two intervals before it stops, so
//! the others take back its part of the limit at once (chitchat 0.11 has no leave message).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use arc_swap::ArcSwap;
use chitchat::{ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig};

use super::auth::{AuthCounts, SignedTransport};
use super::estimate::Estimate;
use super::round::{LEAVING, Round};
use super::tally::Tally;
use super::view::View;
use super::{FleetOptions, FleetStore};
use crate::background::Background;
use crate::metrics::Metrics;
use ratelimitd_core::clock::{Clock, Stopwatch, SystemClock};
use ratelimitd_core::store::memory::MemoryStore;

/// How many gossip intervals a member announces its leave before it stops gossiping: one round
/// to reach the peers (chitchat exchanges with up to three of them a round), one to spare.
const LEAVE_ROUNDS: u32 = 2;

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
pub(crate) struct FleetStats {
    /// Peers alive now (this instance not included).
    pub peers_alive: AtomicU64,
    /// Members known (alive or not yet forgotten), this instance included.
    pub members_known: AtomicU64,
    /// Milliseconds since the stalest live peer's state last changed here.
    pub gossip_age_ms: AtomicU64,
    /// Keys read from the peers in the last round.
    pub peer_keys: AtomicU64,
    /// Node states in the gossip state (every member's generations not yet forgotten, this one
    /// included).
    pub states: AtomicU64,
    /// Key-values in the gossip state, all node states together.
    pub entries: AtomicU64,
    /// Hits a key at its limit may be admitted over it here, as `f64` bits ([`Estimate`]).
    pub estimated_error: AtomicU64,
    /// Datagrams refused by authentication, messages too large to send.
    pub auth: Arc<AuthCounts>,
}

/// The started fleet mode.
#[derive(Debug)]
pub(crate) struct FleetHandle {
    /// The store the limiter decides on.
    pub store: Arc<FleetStore>,
    /// This instance's published counts (their number, the keys dropped at the cap).
    pub tally: Arc<Tally>,
    /// The last round's figures.
    pub stats: Arc<FleetStats>,
}

/// Starts gossip on `options.bind` and returns the store sharing `memory`'s counts; the gossip
/// round runs in `bg` until shutdown. Its gauges are registered with `metrics` (`None` with
/// `DISABLE_STATS`).
pub(crate) async fn start(
    options: &FleetOptions,
    memory: Arc<MemoryStore>,
    clock: Arc<dyn Clock>,
    metrics: Option<&Arc<Metrics>>,
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
        interval: options.interval,
        seen: HashMap::new(),
        since: Stopwatch::start(),
        estimate: Estimate::new(options.interval),
    };
    bg.spawn(run(handle, round, options.interval, bg.stopped()));
    tracing::info!(bind = %options.bind, peers = ?options.peers, "fleet gossip started");
    let fleet = FleetHandle {
        store,
        tally,
        stats,
    };
    if let Some(m) = metrics {
        m.register(Arc::new(fleet.gauges()));
    }
    Ok(fleet)
}

/// Runs a round every `interval` until `stop`; then announces the leave, keeps the rounds going
/// for [`LEAVE_ROUNDS`] intervals (requests still draining publish their counts meanwhile), and
/// leaves the cluster's gossip. The shutdown's drain timeout bounds it all.
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
    handle
        .with_chitchat(|c| c.self_node_state().set(LEAVING, "1"))
        .await;
    let announced = interval * LEAVE_ROUNDS;
    tracing::info!(?announced, "fleet: announcing the leave to the peers");
    let done = tokio::time::sleep(announced);
    tokio::pin!(done);
    loop {
        tokio::select! {
            _ = &mut done => break,
            _ = tick.tick() => handle.with_chitchat(|c| round.run(c)).await,
        }
    }
    if let Err(e) = handle.shutdown().await {
        tracing::warn!(error = %e, "fleet gossip did not shut down cleanly");
    }
}
