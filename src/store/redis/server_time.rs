//! Keeps clocks in step with the main Redis's `TIME`, off the request path: measured at startup
//! (before any port opens) and then once a second, so calls cost no extra round trip, and a failed
//! measurement keeps the last offset (Redis being down is the store's business, reported by health
//! and requests).
//!
//! Always the store's own Redis clock, from which every script call's deadline is read (a call
//! reported failed must never be applied later; see `store::redis::call`). With
//! `REDIS_USE_SERVER_TIME`, also the clock of every decision, so instances whose own clocks
//! disagree still agree on window edges and bucket refills.

use std::future::Future;
use std::sync::Arc;

use super::RedisStore;
use crate::background::every_second;
use ratelimitd_core::clock::{Clock, OffsetClock};

/// The clocks kept in sync with the main Redis (`None` without Redis), measured once. The store's
/// Redis clock (for call deadlines) always is; when Redis's clock `decides` (`REDIS_USE_SERVER_TIME`)
/// it also becomes `clock`, the clock of every decision and reload stamp: the store's own when
/// this host's wall clock is the base, else one shifted from the `manual` clock.
pub(crate) async fn start(
    redis: Option<Arc<RedisStore>>,
    decides: bool,
    manual: bool,
    clock: &mut Arc<dyn Clock>,
) -> Option<ServerTime> {
    let redis = redis?;
    let mut clocks = vec![redis.redis_clock()];
    if decides {
        if manual {
            clocks.push(Arc::new(OffsetClock::new(clock.clone())));
        }
        *clock = clocks[clocks.len() - 1].clone();
    }
    let st = ServerTime {
        clocks,
        redis,
        decides,
    };
    st.sync().await;
    Some(st)
}

/// The clocks to keep in sync with one Redis.
#[derive(Debug)]
pub(crate) struct ServerTime {
    /// Shifted to Redis's time; each keeps its own base clock.
    clocks: Vec<Arc<OffsetClock>>,
    /// Where `TIME` is read.
    redis: Arc<RedisStore>,
    /// Whether decisions follow Redis's clock (`REDIS_USE_SERVER_TIME`): then a failed measurement
    /// is a warning; otherwise only deadlines depend on it and the store reports the outage.
    decides: bool,
}

impl ServerTime {
    /// Measures every offset once from one `TIME` reading; keeps the previous offsets when Redis
    /// does not answer.
    async fn sync(&self) {
        let before: Vec<_> = self.clocks.iter().map(|c| c.base_now()).collect();
        match self.redis.server_time().await {
            Ok(reference) => {
                for (clock, before) in self.clocks.iter().zip(before) {
                    clock.sync(reference, before, clock.base_now());
                }
            }
            Err(e) if self.decides => {
                tracing::warn!(error = %e, "could not read the Redis clock; keeping the last offset");
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not read the Redis clock; keeping the last offset");
            }
        }
    }

    /// Re-measures once a second until `stop`.
    pub(crate) async fn keep_in_sync(self, stop: impl Future<Output = ()>) {
        every_second(stop, || self.sync()).await;
    }
}
