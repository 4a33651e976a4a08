//! Demand: what one stream asked of a bucket lately ([`Recent`]), and the board where every
//! stream of every ratelimitd instance posts it and reads the others' ([`Board`]): the Redis
//! store's hash per bucket (one script call, `lua/rlqs_demand.lua`) or, on the memory store, a
//! map in this process. A stream posts a demand only when it changed (or its entry is half-way
//! to expiry) and otherwise only reads; entries expire after a few reporting intervals, so a
//! stream that stops reporting stops taking budget. Changes are announced on the board's
//! [`Feed`], which tells the other streams which buckets to read again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::bucket::BucketKey;
use super::changes::{Changed, Feed};
use crate::store::redis::RedisStore;
use crate::store::redis::quota_demand::DemandPost;
use ratelimitd_core::clock::Timestamp;

/// Reports a demand is averaged over.
const RECENT_REPORTS: usize = 3;

/// A stream's recent demand for one bucket: requests (allowed and denied) over the time of its
/// last `RECENT_REPORTS` reports.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recent {
    reports: [(u64, f64); RECENT_REPORTS],
    next: usize,
}

impl Recent {
    /// Adds a report of `requests` over `elapsed` (a report covers at least one second: Envoy
    /// sends whole seconds, and 0 on a bucket's first report).
    pub(crate) fn add(&mut self, requests: u64, elapsed: Duration) {
        self.reports[self.next] = (requests, elapsed.as_secs_f64().max(1.0));
        self.next = (self.next + 1) % RECENT_REPORTS;
    }

    /// Requests per second over the recent reports.
    pub(crate) fn per_second(&self) -> f64 {
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
    /// The live demands (requests per second) of bucket `key`, the caller's first; with
    /// `turn.post`, first records the caller's demand until `now + ttl` (without, its demand is
    /// what it last posted).
    pub async fn exchange(&self, key: &BucketKey, turn: DemandPost) -> Vec<f64> {
        match self {
            Board::Memory(m) => m.exchange(key, turn),
            Board::Redis(redis, local) => {
                // Boxed: the store call's future is deep, and every stream's future holds it.
                let call = Box::pin(redis.exchange_demand(key.demand_key(), turn));
                match call.await {
                    Ok(values) => values,
                    Err(e) => {
                        tracing::warn!(error = %e, "RLQS demand exchange failed; splitting on this instance's view");
                        // The fallback view posts every time: it has no earlier post to rely on.
                        local.exchange(key, DemandPost { post: true, ..turn })
                    }
                }
            }
        }
        .into_iter()
        .map(|m| m as f64 / 1000.0)
        .collect()
    }

    /// The in-process board (the memory store's, or the one that stands in while Redis fails),
    /// which holds the change log.
    fn local(&self) -> &MemoryBoard {
        match self {
            Board::Memory(m) | Board::Redis(_, m) => m,
        }
    }

    /// Where a stream that starts watching changes now starts. On Redis this process's place in
    /// the fleet's feed is taken first if it has none yet (a first read starts at the newest
    /// entry), so every change announced after the stream's first board read is seen.
    pub async fn cursor(&self, prefix: &str) -> u64 {
        if let Board::Redis(redis, local) = self {
            local.feed.start(redis, &feed_key(prefix)).await;
        }
        self.local().feed.cursor()
    }

    /// The buckets other streams changed since `cursor` (moved to now), for stream `member`; on
    /// Redis the fleet's change feed `{prefix}rlqs_changes` is read first (at most once a second
    /// for all streams of this process).
    pub async fn changes(&self, prefix: &str, cursor: &mut u64, member: u64) -> Changed {
        if let Board::Redis(redis, local) = self {
            local.feed.poll(redis, &feed_key(prefix)).await;
        }
        self.local().feed.since(cursor, member)
    }

    /// Tells the other streams (of the fleet, on Redis) that stream `member` changed the demands
    /// of the buckets of fingerprints `buckets` (none: no call).
    pub async fn announce(&self, prefix: &str, member: u64, buckets: Vec<u64>) {
        let redis = match self {
            Board::Redis(r, _) => Some(&**r),
            Board::Memory(_) => None,
        };
        let key = feed_key(prefix);
        self.local()
            .feed
            .announce(redis, &key, member, buckets)
            .await;
    }

    /// Forgets stream `member`'s demand for `key` (its stream ended): on Redis too, so an
    /// ended Envoy stops holding a share at once rather than after its demand's expiry.
    pub async fn leave(&self, key: &BucketKey, member: u64) {
        match self {
            Board::Memory(m) => m.leave(key, member),
            Board::Redis(redis, m) => {
                m.leave(key, member);
                if let Err(e) = Box::pin(redis.leave_demand(key.demand_key(), member)).await {
                    tracing::warn!(error = %e, "RLQS demand leave failed; the entry expires on its own");
                }
            }
        }
    }
}

/// The name of the fleet's change feed.
fn feed_key(prefix: &str) -> String {
    format!("{prefix}rlqs_changes")
}

/// A demand in requests per second as the board holds it: thousandths, rounded. Two demands
/// that round alike are the same demand (nothing is written for the change).
pub(crate) fn milli(demand: f64) -> u64 {
    (demand.max(0.0) * 1000.0).round() as u64
}

/// One bucket's streams: member → (demand in thousandths, expiry).
type Streams = HashMap<u64, (u64, Timestamp)>;

/// The in-process board: bucket → stream → (demand in thousandths, expiry), keyed by the
/// buckets' shared names (no copy of the identity). Bounded by the streams and buckets per
/// stream the service admits; streams leave when they end.
#[derive(Debug, Default)]
pub struct MemoryBoard {
    buckets: Mutex<HashMap<Arc<str>, Streams>>,
    /// Which buckets changed lately.
    feed: Feed,
}

impl MemoryBoard {
    fn exchange(&self, key: &BucketKey, turn: DemandPost) -> Vec<u64> {
        let DemandPost {
            member,
            milli,
            now,
            ttl,
            post,
        } = turn;
        let mut buckets = self.buckets.lock();
        let streams = match buckets.get_mut(key.demand_key()) {
            Some(s) => s,
            None if post => buckets.entry(key.shared()).or_default(),
            None => return vec![milli],
        };
        if post {
            streams.insert(member, (milli, now.saturating_add(ttl)));
        }
        streams.retain(|_, (_, expires)| *expires > now);
        let mut out = vec![milli];
        out.extend(
            streams
                .iter()
                .filter(|(m, _)| **m != member)
                .map(|(_, (d, _))| *d),
        );
        if streams.is_empty() {
            buckets.remove(key.demand_key());
        }
        out
    }

    fn leave(&self, key: &BucketKey, member: u64) {
        let mut buckets = self.buckets.lock();
        if let Some(streams) = buckets.get_mut(key.demand_key()) {
            streams.remove(&member);
            if streams.is_empty() {
                buckets.remove(key.demand_key());
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
        let b = BucketKey::new("", "d", &[("k", "v")]);
        let ttl = Duration::from_secs(3);
        let t0 = (Timestamp::from_secs(100), ttl);
        // Stream `member` asks `demand` requests per second at (now, ttl).
        let turn = |(member, demand): (u64, f64), (now, ttl), post| DemandPost {
            member,
            milli: milli(demand),
            now,
            ttl,
            post,
        };
        assert_eq!(board.exchange(&b, turn((1, 5.0), t0, true)).await, [5.0]);
        assert_eq!(
            board.exchange(&b, turn((2, 7.5), t0, true)).await,
            [7.5, 5.0]
        );
        // A read does not write: stream 3's demand is not seen by the others.
        let mut seen = board.exchange(&b, turn((3, 9.0), t0, false)).await;
        seen[1..].sort_by(f64::total_cmp);
        assert_eq!(seen, [9.0, 5.0, 7.5]);
        assert_eq!(
            board.exchange(&b, turn((1, 5.0), t0, false)).await,
            [5.0, 7.5]
        );
        // Stream 1 has not posted for the TTL: only stream 2 is left.
        let later = (Timestamp::from_secs(103), ttl);
        assert_eq!(board.exchange(&b, turn((2, 1.0), later, true)).await, [1.0]);
        board.leave(&b, 2).await;
        assert_eq!(
            board.exchange(&b, turn((3, 2.0), later, false)).await,
            [2.0]
        );
        let Board::Memory(m) = &board else {
            unreachable!()
        };
        assert!(
            m.buckets.lock().is_empty(),
            "a bucket nobody posts is forgotten"
        );
    }
}
