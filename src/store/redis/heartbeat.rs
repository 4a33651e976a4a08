//! The instance heartbeat through the main Redis: each ratelimitd instance adds itself to one
//! sorted set, scored by the second it was last seen, drops members not seen for
//! [`HEARTBEAT_TTL_SECS`], and reads how many remain — one pipelined round trip a second, off the
//! request path. The set's name is one hash tag, so on Redis Cluster it lives in one slot.

use std::time::Duration;

use super::{RedisStore, unavailable};
use crate::clock::Timestamp;
use crate::store::StoreError;

/// An instance not seen for this long no longer counts as alive.
pub const HEARTBEAT_TTL_SECS: u64 = 3;

/// The sorted set of live instances for keys under `prefix` (`CACHE_KEY_PREFIX`).
pub fn instances_key(prefix: &str) -> String {
    format!("{{{prefix}ratelimitd_instances}}")
}

impl RedisStore {
    /// Announces instance `id` at `now` in the set `key` and returns how many instances were
    /// seen within the TTL (this one included).
    pub async fn heartbeat(&self, key: &str, id: &str, now: Timestamp) -> Result<u64, StoreError> {
        let now = now.as_secs();
        let oldest = now.saturating_sub(HEARTBEAT_TTL_SECS);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .zadd(key, id, now)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(key)
            .arg("-inf")
            .arg(format!("({oldest}"))
            .ignore()
            .expire(key, (HEARTBEAT_TTL_SECS * 10) as i64)
            .ignore()
            .zcard(key);
        let bound = self.response_timeout.max(Duration::from_millis(500));
        match tokio::time::timeout(bound, self.main.pipeline::<(u64,)>(&pipe)).await {
            Ok(Ok((live,))) => Ok(live),
            Ok(Err(e)) => Err(unavailable("heartbeat", &e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer the heartbeat within {bound:?}"
            ))),
        }
    }
}
