//! Which buckets' demands changed lately ([`Feed`]), so that a stream's once-a-second re-split
//! reads the board only for those: a demand that holds still costs no board read, however many
//! buckets report it. A stream that posts a changed demand, leaves a bucket or lets its entry
//! expire records the buckets' fingerprints here (other streams of this process see them at their
//! next tick) and, on Redis, in the fleet's change feed (`lua/rlqs_changes.lua`), which this
//! process reads at most once a second for all its streams. What is not recorded anywhere is an
//! instance that died: its entries expire unannounced, and the others take its share back at
//! their next post of the bucket.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use parking_lot::Mutex;

use crate::store::redis::RedisStore;
use crate::store::redis::quota_demand::FeedCursor;
use ratelimitd_core::clock::Stopwatch;

/// Entries the in-process log keeps at most.
const LOG_ENTRIES: usize = 1024;

/// How long the in-process log keeps an entry (streams read it once a second).
const LOG_AGE: Duration = Duration::from_secs(10);

/// Entries the fleet's feed keeps, about (a reader further behind re-splits everything once).
pub(crate) const FEED_CAP: usize = 1024;

/// The shortest time between two reads of the fleet's feed by one process.
const POLL_EVERY: Duration = Duration::from_millis(900);

/// What changed since a stream last looked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Anything may have (entries were lost): re-split every bucket with active demand.
    All,
    /// The buckets with these fingerprints ([`super::bucket::BucketKey::fingerprint`]).
    Buckets(HashSet<u64>),
}

impl Changed {
    /// Whether the bucket of fingerprint `fp` may have changed.
    pub fn contains(&self, fp: u64) -> bool {
        match self {
            Changed::All => true,
            Changed::Buckets(b) => b.contains(&fp),
        }
    }
}

/// One entry of the in-process log.
#[derive(Debug)]
struct Entry {
    seq: u64,
    at: Stopwatch,
    /// The stream that made the change (it skips its own), `None` for the fleet's.
    member: Option<u64>,
    /// `None`: anything may have changed.
    buckets: Option<Vec<u64>>,
}

#[derive(Debug, Default)]
struct Log {
    /// The sequence number of the next entry.
    next: u64,
    /// Entries below this number were dropped.
    dropped: u64,
    entries: VecDeque<Entry>,
}

/// The fleet feed's reading state.
#[derive(Debug, Default)]
struct Poll {
    /// `None` until the first read took a place in the feed.
    cursor: Option<FeedCursor>,
    last: Option<Stopwatch>,
}

/// This process's log of changes, and its reading of the fleet's feed on Redis.
#[derive(Debug)]
pub(crate) struct Feed {
    /// This process in the fleet's feed (its own entries are skipped when read back).
    instance: u64,
    log: Mutex<Log>,
    /// Held across the read, so that one stream reads for all.
    poll: tokio::sync::Mutex<Poll>,
}

impl Default for Feed {
    fn default() -> Feed {
        Feed {
            instance: fastrand::u64(..),
            log: Mutex::default(),
            poll: tokio::sync::Mutex::default(),
        }
    }
}

impl Feed {
    /// Where a stream that starts reading now starts.
    pub(crate) fn cursor(&self) -> u64 {
        self.log.lock().next
    }

    /// Records that stream `member` (`None`: another instance) changed `buckets` (`None`: any).
    pub(crate) fn record(&self, member: Option<u64>, buckets: Option<Vec<u64>>) {
        let mut log = self.log.lock();
        let seq = log.next;
        log.next += 1;
        log.entries.push_back(Entry {
            seq,
            at: Stopwatch::start(),
            member,
            buckets,
        });
        while log
            .entries
            .front()
            .is_some_and(|e| log.entries.len() > LOG_ENTRIES || e.at.elapsed() > LOG_AGE)
        {
            if let Some(e) = log.entries.pop_front() {
                log.dropped = e.seq + 1;
            }
        }
    }

    /// What other streams changed since `cursor` (moved to now), for stream `member`.
    pub(crate) fn since(&self, cursor: &mut u64, member: u64) -> Changed {
        let log = self.log.lock();
        let from = std::mem::replace(cursor, log.next);
        if from < log.dropped {
            return Changed::All;
        }
        let mut out = HashSet::new();
        for e in log.entries.iter().filter(|e| e.seq >= from) {
            if e.member == Some(member) {
                continue;
            }
            match &e.buckets {
                Some(b) => out.extend(b.iter().copied()),
                None => return Changed::All,
            }
        }
        Changed::Buckets(out)
    }

    /// Announces to the fleet that stream `member` changed `buckets`, and records it here.
    pub(crate) async fn announce(
        &self,
        redis: Option<&RedisStore>,
        key: &str,
        member: u64,
        buckets: Vec<u64>,
    ) {
        if buckets.is_empty() {
            return;
        }
        if let Some(redis) = redis {
            let call = Box::pin(redis.announce_changes(key, self.instance, FEED_CAP, &buckets));
            if let Err(e) = call.await {
                tracing::warn!(error = %e, "RLQS change announcement failed; the other instances see the change at their next post");
            }
        }
        self.record(Some(member), Some(buckets));
    }

    /// Takes this process's place in the fleet's feed `key`, unless it has one.
    pub(crate) async fn start(&self, redis: &RedisStore, key: &str) {
        let mut p = self.poll.lock().await;
        if p.cursor.is_none() {
            self.read(&mut p, redis, key).await;
        }
    }

    /// Reads the fleet's feed `key` into the log, unless it was read less than a second ago.
    pub(crate) async fn poll(&self, redis: &RedisStore, key: &str) {
        let mut p = self.poll.lock().await;
        if p.last.as_ref().is_some_and(|w| w.elapsed() < POLL_EVERY) {
            return;
        }
        self.read(&mut p, redis, key).await;
    }

    async fn read(&self, p: &mut Poll, redis: &RedisStore, key: &str) {
        p.last = Some(Stopwatch::start());
        let read = Box::pin(redis.read_changes(key, self.instance, FEED_CAP, p.cursor));
        match read.await {
            Ok(r) => {
                p.cursor = Some(r.cursor);
                if r.lost {
                    self.record(None, None);
                } else if !r.changed.is_empty() {
                    self.record(None, Some(r.changed));
                }
            }
            // The cursor stays: the entries since are read once Redis answers again.
            Err(e) => tracing::warn!(error = %e, "RLQS change feed read failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_sees_the_others_changes_once_and_not_its_own() {
        let feed = Feed::default();
        let (mut one, mut two) = (feed.cursor(), feed.cursor());
        feed.record(Some(1), Some(vec![10, 11]));
        feed.record(None, Some(vec![12]));
        assert_eq!(
            feed.since(&mut one, 1),
            Changed::Buckets(HashSet::from([12]))
        );
        assert_eq!(
            feed.since(&mut two, 2),
            Changed::Buckets(HashSet::from([10, 11, 12]))
        );
        assert_eq!(feed.since(&mut two, 2), Changed::Buckets(HashSet::new()));
        // A lost stretch of the fleet's feed: everything.
        feed.record(None, None);
        assert_eq!(feed.since(&mut two, 2), Changed::All);
        assert!(!Changed::Buckets(HashSet::new()).contains(10));
    }

    #[test]
    fn a_reader_behind_the_log_re_splits_everything() {
        let feed = Feed::default();
        let mut behind = feed.cursor();
        for i in 0..=LOG_ENTRIES as u64 {
            feed.record(Some(1), Some(vec![i]));
        }
        assert_eq!(feed.since(&mut behind, 2), Changed::All);
        assert_eq!(feed.since(&mut behind, 2), Changed::Buckets(HashSet::new()));
    }
}
