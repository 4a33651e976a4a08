//! The RLQS demand exchange on the main Redis (`lua/rlqs_demand.lua`): a reporting stream writes
//! its recent demand for a quota bucket into the bucket's hash when that demand changed (or its
//! entry is half-way to expiry), and reads back every live demand, so all ratelimitd instances
//! divide one global budget (`crate::rlqs`). One script call per changed demand or per re-split
//! of a bucket with active demand, off the `ShouldRateLimit` path, bounded by the response
//! timeout. Beside the boards, a change feed (`lua/rlqs_changes.lua`, one Redis stream per key
//! prefix) names the buckets whose demands changed, so that instances re-split only those: one
//! call per usage report that changed a demand, and one read per instance a second. The regions' sync (`crate::region`) exchanges demand on boards of the same format in
//! the global store, one hash per key and region ([`super::region_demand`]).

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::{RedisStore, unavailable};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::store::StoreError;

/// The demand exchange script (with the deadline prelude every script carries).
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/rlqs_demand.lua")
    ))
}

/// The change feed script (with the deadline prelude).
static CHANGES: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/rlqs_changes.lua")
    ))
});

/// A position in the change feed: the id (milliseconds, sequence) of the last entry read; `(0, 0)`
/// for the feed's start (it was empty).
pub(crate) type FeedCursor = (u64, u64);

/// What a read of the change feed found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedRead {
    /// Entries after the cursor may have been trimmed before they were read: any bucket may
    /// have changed.
    pub lost: bool,
    /// Where the next read starts.
    pub cursor: FeedCursor,
    /// Fingerprints of the buckets other instances changed since the cursor.
    pub changed: Vec<u64>,
}

/// One stream's turn at a bucket's demand board: who, how much, when and for how long, and
/// whether it writes its demand or only reads the others'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemandPost {
    /// The stream (a member of the bucket's hash).
    pub member: u64,
    /// Its demand, in thousandths of a request per second.
    pub milli: u64,
    /// When the exchange happens.
    pub now: Timestamp,
    /// How long a written demand lives.
    pub ttl: Duration,
    /// Write the demand first; without, only read (`milli` is then just the caller's entry of
    /// the answer).
    pub post: bool,
}

impl RedisStore {
    /// Reads the live demands of the bucket hash `key`, the caller's first; with `turn.post`,
    /// first records the caller's demand until `now + ttl`.
    pub async fn exchange_demand(
        &self,
        key: &str,
        turn: DemandPost,
    ) -> Result<Vec<u64>, StoreError> {
        let DemandPost {
            member,
            milli: demand,
            now,
            ttl,
            post,
        } = turn;
        let now_ms = now.as_micros() / 1000;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        // The last argument is the deadline the prelude checks; 0: none (a demand write that
        // lands late is harmless, unlike a counted hit).
        let (keys, args) = ([key], [member, demand, now_ms, ttl_ms, u64::from(post), 0]);
        let call = self.main.eval(&self.quota_demand, &keys, &args);
        let values = self.demand_reply(
            "exchange",
            tokio::time::timeout(self.response_timeout, call).await,
        )?;
        Ok(values.into_iter().map(|v| v.max(0) as u64).collect())
    }

    /// Removes stream `member` from the bucket hash `key` (its stream ended or its limit went),
    /// so the other streams' next split no longer counts it.
    pub async fn leave_demand(&self, key: &str, member: u64) -> Result<(), StoreError> {
        let (keys, args) = ([key], [member, 0, 0, 0, 0, 0]);
        let call = self.main.eval(&self.quota_demand, &keys, &args);
        self.demand_reply(
            "leave",
            tokio::time::timeout(self.response_timeout, call).await,
        )
        .map(drop)
    }

    /// Writes an entry of the change feed `key`: instance `instance` changed the demands of the
    /// buckets whose fingerprints are `changed`. The feed keeps about `cap` entries.
    pub async fn announce_changes(
        &self,
        key: &str,
        instance: u64,
        cap: usize,
        changed: &[u64],
    ) -> Result<(), StoreError> {
        let list: Vec<String> = changed.iter().map(u64::to_string).collect();
        let args = [
            instance.to_string(),
            cap.to_string(),
            "-1".to_string(),
            "0".to_string(),
            list.join(" "),
            "0".to_string(),
        ];
        let keys = [key];
        let call = self.main.eval(&CHANGES, &keys, &args);
        self.demand_reply(
            "change",
            tokio::time::timeout(self.response_timeout, call).await,
        )
        .map(drop)
    }

    /// Reads the change feed `key` after `cursor` for instance `instance` (its own entries are
    /// skipped: it knows its changes already). Without a cursor, the read starts at the newest
    /// entry (and reads nothing); a cursor of `(0, 0)` reads from the feed's start.
    pub async fn read_changes(
        &self,
        key: &str,
        instance: u64,
        cap: usize,
        cursor: Option<FeedCursor>,
    ) -> Result<FeedRead, StoreError> {
        let (ms, seq) = cursor.map_or(("-2".to_string(), "0".to_string()), |(m, s)| {
            (m.to_string(), s.to_string())
        });
        let args = [
            instance.to_string(),
            cap.to_string(),
            ms,
            seq,
            String::new(),
            "0".to_string(),
        ];
        let keys = [key];
        let call = self.main.eval(&CHANGES, &keys, &args);
        let values = self.demand_reply(
            "change feed read",
            tokio::time::timeout(self.response_timeout, call).await,
        )?;
        let whole = |v: &i64| u64::try_from(*v).unwrap_or(0);
        let at = |i: usize| values.get(i).map(whole);
        match (at(0), at(1), at(2)) {
            (Some(lost), Some(ms), Some(seq)) => Ok(FeedRead {
                lost: lost != 0,
                cursor: (ms, seq),
                changed: values[3..].iter().map(whole).collect(),
            }),
            _ => Err(StoreError::Unavailable(format!(
                "redis answered the RLQS change feed read with {values:?}"
            ))),
        }
    }

    /// The outcome of one call of the script (`what` it did, for the error).
    fn demand_reply(
        &self,
        what: &str,
        reply: Result<Result<Vec<i64>, redis::RedisError>, tokio::time::error::Elapsed>,
    ) -> Result<Vec<i64>, StoreError> {
        match reply {
            Ok(Ok(values)) => Ok(values),
            Ok(Err(e)) => Err(unavailable(&format!("RLQS demand {what}"), &e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer the RLQS demand {what} within {:?}",
                self.response_timeout
            ))),
        }
    }
}
