//! Demand: what one stream asked of a bucket lately ([`Recent`]), and the board where every
//! stream of every ratelimitd instance posts it and reads the others' ([`Board`]): the Redis
//! store's hash per bucket (one script call, `lua/rlqs_demand.lua`) or, on the memory store, a
//! map in this process. Entries expire after a few reporting intervals, so a stream that stops
//! reporting stops taking budget.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::clock::Timestamp;
use crate::store::redis::RedisStore;

/// Reports a demand is averaged over.
const RECENT_REPORTS: usize = 3;

/// A stream's recent demand for one bucket: requests (allowed and denied) over the time of its
/// last [`RECENT_REPORTS`] reports.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    reports: [(u64, f64); RECENT_REPORTS],
    next: usize,
}

impl Recent {
    /// Adds a report of `requests` over `elapsed` (a report covers at least one second: Envoy
    /// sends whole seconds, and 0 on a bucket's first report).
    pub fn add(&mut self, requests: u64, elapsed: Duration) {
        self.reports[self.next] = (requests, elapsed.as_secs_f64().max(1.0));
        self.next = (self.next + 1) % RECENT_REPORTS;
    }

    /// Requests per second over the recent reports.
    pub fn per_second(&self) -> f64 {
        let (n, secs) = self
            .reports
            .iter()
            .fold((0u64, 0.0), |(n, s), (r, e)| (n.saturating_add(*r), s + e));
        if secs > 0.0 { n as f64 / secs } else { 0.0 }
    }
}

/// Where demands meet.
#[derive(Debug, Clone)]
pub enum Board {
    /// In this process (the memory store: one instance owns its limits).
    Memory(Arc<MemoryBoard>),
    /// Through Redis, shared by the fleet; the memory board stands in while Redis fails.
    Redis(Arc<RedisStore>, Arc<MemoryBoard>),
}

impl Board {
    /// Posts `demand` (requests per second) of stream `member` for bucket `key` until
    /// `now + ttl`; returns the live demands, the caller's first.
    pub async fn exchange(
        &self,
        key: &str,
        (member, demand): (u64, f64),
        now: Timestamp,
        ttl: Duration,
    ) -> Vec<f64> {
        let milli = (demand.max(0.0) * 1000.0).round() as u64;
        match self {
            Board::Memory(m) => m.exchange(key, (member, milli), now, ttl),
            Board::Redis(redis, local) => {
                match redis.exchange_demand(key, (member, milli), now, ttl).await {
                    Ok(values) => values,
                    Err(e) => {
                        tracing::warn!(error = %e, "RLQS demand exchange failed; splitting on this instance's view");
                        local.exchange(key, (member, milli), now, ttl)
                    }
                }
            }
        }
        .into_iter()
        .map(|m| m as f64 / 1000.0)
        .collect()
    }

    /// Forgets stream `member`'s demand for `key` (its stream ended): on Redis too, so an
    /// ended Envoy stops holding a share at once rather than after its demand's expiry.
    pub async fn leave(&self, key: &str, member: u64) {
        match self {
            Board::Memory(m) => m.leave(key, member),
            Board::Redis(redis, m) => {
                m.leave(key, member);
                if let Err(e) = redis.leave_demand(key, member).await {
                    tracing::warn!(error = %e, "RLQS demand leave failed; the entry expires on its own");
                }
            }
        }
    }
}

/// One bucket's streams: member → (demand in thousandths, expiry).
type Streams = HashMap<u64, (u64, Timestamp)>;

/// The in-process board: bucket → stream → (demand in thousandths, expiry). Bounded by the
/// streams and buckets per stream the service admits; streams leave when they end.
#[derive(Debug, Default)]
pub struct MemoryBoard {
    buckets: Mutex<HashMap<String, Streams>>,
}

impl MemoryBoard {
    fn exchange(
        &self,
        key: &str,
        (member, milli): (u64, u64),
        now: Timestamp,
        ttl: Duration,
    ) -> Vec<u64> {
        let mut buckets = self.buckets.lock();
        let streams = buckets.entry(key.to_string()).or_default();
        streams.insert(member, (milli, now.saturating_add(ttl)));
        streams.retain(|_, (_, expires)| *expires > now);
        let mut out = vec![milli];
        out.extend(
            streams
                .iter()
                .filter(|(m, _)| **m != member)
                .map(|(_, (d, _))| *d),
        );
        out
    }

    fn leave(&self, key: &str, member: u64) {
        let mut buckets = self.buckets.lock();
        if let Some(streams) = buckets.get_mut(key) {
            streams.remove(&member);
            if streams.is_empty() {
                buckets.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_demand_averages_the_last_reports() {
        let mut r = Recent::default();
        r.add(10, Duration::ZERO);
        assert_eq!(r.per_second(), 10.0);
        r.add(20, Duration::from_secs(1));
        r.add(30, Duration::from_secs(1));
        assert_eq!(r.per_second(), 20.0);
        // The oldest report drops out.
        r.add(60, Duration::from_secs(2));
        assert_eq!(r.per_second(), 110.0 / 4.0);
    }

    #[tokio::test]
    async fn the_memory_board_expires_and_forgets_streams() {
        let board = Board::Memory(Arc::new(MemoryBoard::default()));
        let ttl = Duration::from_secs(3);
        let t0 = Timestamp::from_secs(100);
        assert_eq!(board.exchange("b", (1, 5.0), t0, ttl).await, [5.0]);
        assert_eq!(board.exchange("b", (2, 7.5), t0, ttl).await, [7.5, 5.0]);
        // Stream 1 has not reported for the TTL: only stream 2 is left.
        let later = Timestamp::from_secs(103);
        assert_eq!(board.exchange("b", (2, 1.0), later, ttl).await, [1.0]);
        board.leave("b", 2).await;
        assert_eq!(board.exchange("b", (3, 2.0), later, ttl).await, [2.0]);
    }
}
