//! Fleet mode of the embedded store: instances without Redis share approximate counters by
//! gossip. Each instance counts in its own memory store; the counts of recently active keys are
//! published into the gossip state of [chitchat] (Scuttlebutt anti-entropy with a phi-accrual
//! failure detector, as Quickwit runs it), and a decision adds the peers' latest known counts of
//! the key's current window to the local count. Peers that the failure detector holds dead are
//! not counted; the limit is split by the last known membership instead (live over known
//! instances, as `failure_mode: local` splits it), so the side of a partition holding K of N
//! instances admits about K/N of the limit. A member that shuts down announces its leave in its
//! gossip state first, and the others take back its part at once. Only window algorithms are shared (`fixed_window`
//! exchanges the current window's count, `sliding_window` the current and previous counts);
//! every other algorithm is refused when the configuration loads. Every gossip datagram carries
//! an HMAC keyed by `FLEET_SECRET` ([`auth`]); anything else is dropped before chitchat sees it.
//!
//! [chitchat]: https://docs.rs/chitchat

pub mod auth;
pub mod estimate;
mod report;
mod round;
pub mod store;
pub mod tally;
pub mod view;
pub mod wiring;

use std::net::SocketAddr;
use std::time::Duration;

use crate::secret::Secret;

pub use report::FleetGauges;
pub use store::FleetStore;
pub use wiring::{FleetError, FleetHandle, FleetStats, start};

/// The fleet settings (`FLEET_*`); present only when `FLEET_BIND` turns the mode on.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetOptions {
    /// `FLEET_BIND`: the UDP address gossip binds (and only that one).
    pub bind: SocketAddr,
    /// `FLEET_ADVERTISE` (default `FLEET_BIND`): the address peers reach this instance at; it
    /// also names the instance, so a restarted instance is known as the same member.
    pub advertise: SocketAddr,
    /// `FLEET_PEERS`: seed `host:port` items; a DNS name (a Kubernetes headless Service) is
    /// resolved again while the fleet runs, so members come and go without a settings change.
    pub peers: Vec<String>,
    /// `FLEET_SECRET`: the shared key of the messages' HMAC.
    pub secret: Secret,
    /// `FLEET_CLUSTER` (default `ratelimitd`): peers of another cluster name are not merged.
    pub cluster: String,
    /// `FLEET_GOSSIP_INTERVAL` (default 200ms): how often counts are published and exchanged.
    pub interval: Duration,
    /// `FLEET_MAX_KEYS` (default 1000): keys this instance publishes (and reads per peer) at
    /// most; beyond that the least recently used key stops being published.
    pub max_keys: usize,
    /// `FLEET_FORGET_AFTER` (default 10m): how long a member that stopped answering still counts
    /// in the membership the limit is split by.
    pub forget_after: Duration,
}
