//! Stream slots: at most `RLQS_MAX_STREAMS` streams open at once, and at most
//! `RLQS_MAX_STREAMS_PER_PEER` of them from one client IP address, so a client that opens streams
//! and says nothing cannot lock the other Envoys out. Unix-socket clients (no address) share one
//! peer's share. A slot is given back when the stream's task ends.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tonic::Status;

use super::Shared;

/// The open streams, in all and per peer (a peer appears only while it has one open, so the map
/// holds at most `RLQS_MAX_STREAMS` entries).
#[derive(Debug, Default)]
pub(crate) struct Slots {
    open: Mutex<(usize, HashMap<Option<IpAddr>, usize>)>,
}

/// One open stream's place, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    peer: Option<IpAddr>,
    shared: Arc<Shared>,
}

impl Slots {
    /// A place for a stream from `peer`, or the `RESOURCE_EXHAUSTED` status naming the cap it
    /// would pass.
    pub(crate) fn take(
        self: &Arc<Self>,
        peer: Option<IpAddr>,
        shared: &Arc<Shared>,
    ) -> Result<Slot, Status> {
        // An IPv4 client on a dual-stack socket is the same peer as over IPv4.
        let peer = peer.map(|ip| ip.to_canonical());
        let (max, per_peer) = (
            shared.options.max_streams,
            shared.options.max_streams_per_peer,
        );
        let mut open = self.open.lock();
        if open.0 >= max {
            return Err(Status::resource_exhausted(format!(
                "too many RLQS streams are open (RLQS_MAX_STREAMS={max})"
            )));
        }
        let mine = open.1.entry(peer).or_default();
        if *mine >= per_peer {
            let who = peer.map_or("this unix-socket client".to_string(), |ip| ip.to_string());
            return Err(Status::resource_exhausted(format!(
                "{who} has {mine} RLQS streams open (RLQS_MAX_STREAMS_PER_PEER={per_peer})"
            )));
        }
        *mine += 1;
        open.0 += 1;
        drop(open);
        shared.metrics_streams(1);
        Ok(Slot {
            slots: self.clone(),
            peer,
            shared: shared.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock();
        open.0 = open.0.saturating_sub(1);
        if let Some(n) = open.1.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.peer);
            }
        }
        drop(open);
        self.shared.metrics_streams(-1);
    }
}
