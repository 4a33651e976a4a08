//! `REDIS_USE_SERVER_TIME`: every instance decides by the main Redis's clock, so instances whose
//! own clocks disagree still agree on window edges and bucket refills. The offset between this
//! host's clock and Redis's `TIME` is measured at startup (before any port opens) and then once a
//! second, off the request path: decisions cost no extra round trip, and a failed measurement keeps
//! the last offset (Redis being down is the store's business, reported by health and requests).

use std::future::Future;
use std::sync::Arc;

use crate::clock::OffsetClock;
use crate::store::redis::RedisStore;

/// Measures the offset once; logs and keeps the previous offset when Redis does not answer.
pub(super) async fn sync(clock: &OffsetClock, redis: &RedisStore) {
    let before = clock.base_now();
    match redis.server_time().await {
        Ok(reference) => clock.sync(reference, before, clock.base_now()),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the Redis clock; keeping the last offset")
        }
    }
}

/// Re-measures the offset once a second until `stop`.
pub(super) async fn keep_in_sync(
    clock: Arc<OffsetClock>,
    redis: Arc<RedisStore>,
    stop: impl Future<Output = ()>,
) {
    super::tasks::every_second(stop, || sync(&clock, &redis)).await;
}
