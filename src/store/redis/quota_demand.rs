//! The RLQS demand exchange on the main Redis (`lua/rlqs_demand.lua`): each reporting stream
//! writes its recent demand for a quota bucket into the bucket's hash and reads back every live
//! demand, so all ratelimitd instances divide one global budget (`crate::rlqs`). One script call
//! per report and bucket, off the `ShouldRateLimit` path, bounded by the response timeout.

use std::time::Duration;

use redis::Script;

use super::{RedisStore, unavailable};
use crate::clock::Timestamp;
use crate::store::StoreError;

/// The demand exchange script (with the deadline prelude every script carries).
pub(super) fn script() -> Script {
    Script::new(concat!(
        include_str!("../../../lua/deadline.lua"),
        include_str!("../../../lua/rlqs_demand.lua")
    ))
}

impl RedisStore {
    /// Records `demand` (thousandths of a request per second) of stream `member` in the bucket
    /// hash `key` until `now + ttl`, and returns the live demands, the caller's first.
    pub async fn exchange_demand(
        &self,
        key: &str,
        (member, demand): (u64, u64),
        now: Timestamp,
        ttl: Duration,
    ) -> Result<Vec<u64>, StoreError> {
        let now_ms = now.as_micros() / 1000;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        // The last argument is the deadline the prelude checks; 0: none (a demand write that
        // lands late is harmless, unlike a counted hit).
        let args = [member, demand, now_ms, ttl_ms, 0];
        let keys = [key];
        let call = self.main.eval(&self.quota_demand, &keys, &args);
        match tokio::time::timeout(self.response_timeout, call).await {
            Ok(Ok(values)) => Ok(values.into_iter().map(|v| v.max(0) as u64).collect()),
            Ok(Err(e)) => Err(unavailable("RLQS demand exchange", &e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer the RLQS demand exchange within {:?}",
                self.response_timeout
            ))),
        }
    }

    /// Removes stream `member` from the bucket hash `key` (its stream ended or its limit went),
    /// so the other streams' next split no longer counts it.
    pub async fn leave_demand(&self, key: &str, member: u64) -> Result<(), StoreError> {
        let (keys, args) = ([key], [member, 0, 0, 0, 0]);
        let call = self.main.eval(&self.quota_demand, &keys, &args);
        match tokio::time::timeout(self.response_timeout, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(unavailable("RLQS demand leave", &e)),
            Err(_) => Err(StoreError::Unavailable(format!(
                "redis did not answer the RLQS demand leave within {:?}",
                self.response_timeout
            ))),
        }
    }
}
