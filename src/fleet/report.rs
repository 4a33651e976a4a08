//! What the fleet mode shows: Prometheus gauges (`ratelimitd_fleet_*`) and the status page's
//! `fleet` line, both read from the last gossip round's figures.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::FleetHandle;
use crate::insight::StatusLine;
use crate::metrics::{Collect, gauge};

/// The fleet's gauges, `(name, help, value)` each, read at scrape time.
pub(crate) struct FleetGauges(
    Box<dyn Fn() -> Vec<(&'static str, &'static str, f64)> + Send + Sync>,
);

impl std::fmt::Debug for FleetGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetGauges").finish_non_exhaustive()
    }
}

impl Collect for FleetGauges {
    fn families(&self) -> Vec<prometheus::proto::MetricFamily> {
        (self.0)()
            .into_iter()
            .flat_map(|(name, help, value)| gauge(name, help, value))
            .collect()
    }
}

impl FleetHandle {
    /// The gauges: peers alive, members known, gossip age, the estimated error, keys published
    /// and read, the gossip state's size, keys dropped at the cap, datagrams refused by
    /// authentication, messages too large to send.
    pub(crate) fn gauges(&self) -> FleetGauges {
        let stats = self.stats.clone();
        let tally = self.tally.clone();
        FleetGauges(Box::new(move || {
            let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
            vec![
                (
                    "ratelimitd_fleet_peers_alive",
                    "Fleet peers alive (this instance not included)",
                    get(&stats.peers_alive),
                ),
                (
                    "ratelimitd_fleet_members_known",
                    "Fleet members the limit is split by (alive or not yet forgotten, this instance included)",
                    get(&stats.members_known),
                ),
                (
                    "ratelimitd_fleet_gossip_age_seconds",
                    "Age of the stalest live peer's counts",
                    get(&stats.gossip_age_ms) / 1000.0,
                ),
                (
                    "ratelimitd_fleet_estimated_overadmission",
                    "Hits a key at its limit may be admitted over it here: the busiest key's peer hit rate × (gossip age + one interval)",
                    f64::from_bits(stats.estimated_error.load(Ordering::Relaxed)),
                ),
                (
                    "ratelimitd_fleet_keys_published",
                    "Keys whose counts this instance publishes",
                    tally.len() as f64,
                ),
                (
                    "ratelimitd_fleet_peer_keys",
                    "Key counts read from live peers in the last round",
                    get(&stats.peer_keys),
                ),
                (
                    "ratelimitd_fleet_gossip_states",
                    "Node states held in the gossip state (members' generations not yet forgotten, this one included)",
                    get(&stats.states),
                ),
                (
                    "ratelimitd_fleet_gossip_entries",
                    "Key-values held in the gossip state, all node states together",
                    get(&stats.entries),
                ),
                (
                    "ratelimitd_fleet_keys_dropped",
                    "Keys dropped from publication at FLEET_MAX_KEYS since startup",
                    tally.dropped() as f64,
                ),
                (
                    "ratelimitd_fleet_messages_rejected",
                    "Gossip datagrams dropped because they failed authentication, since startup",
                    get(&stats.auth.rejected),
                ),
                (
                    "ratelimitd_fleet_sent_bytes",
                    "Gossip bytes sent, since startup",
                    get(&stats.auth.sent_bytes),
                ),
                (
                    "ratelimitd_fleet_messages_oversize",
                    "Gossip messages not sent because the tag took them past a datagram, since startup",
                    get(&stats.auth.oversize),
                ),
            ]
        }))
    }

    /// The status page's line: membership, gossip age, keys exchanged, the estimated error and
    /// what was refused; degraded while a known member is not answering (the limit is then
    /// split).
    pub(crate) fn status_line(&self) -> StatusLine {
        let stats = self.stats.clone();
        let tally = self.tally.clone();
        Arc::new(move || {
            let s = &stats;
            let alive = s.peers_alive.load(Ordering::Relaxed) + 1;
            let known = s.members_known.load(Ordering::Relaxed).max(alive);
            let text = format!(
                "{alive} of {known} members alive; peers' counts at most {} ms old; {} keys published ({} dropped at FLEET_MAX_KEYS), {} read from peers; estimated over-admission {:.1} hits per limit; {} datagrams failed authentication",
                s.gossip_age_ms.load(Ordering::Relaxed),
                tally.len(),
                tally.dropped(),
                s.peer_keys.load(Ordering::Relaxed),
                f64::from_bits(s.estimated_error.load(Ordering::Relaxed)),
                s.auth.rejected.load(Ordering::Relaxed),
            );
            (text, alive < known)
        })
    }
}
