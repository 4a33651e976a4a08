//! The instance heartbeat through the main Redis: each ratelimitd instance adds itself to one
//! sorted set, scored by the second it was last seen, drops members not seen for
//! [`HEARTBEAT_TTL_SECS`], and reads how many remain — one pipelined round trip a second, off the
//! request path. The set's name is one hash tag, so on Redis Cluster it lives in one slot.
//!
//! [`start`] runs it for the local fallback (`failure_mode: local`), whose share of a limit is
//! one over the instances seen, and which drops its counts once Redis answers again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{RedisStore, unavailable};
use crate::background::{Background, every_second};
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::limiter::fallback::LocalFallback;
use ratelimitd_core::store::{Store, StoreError};

/// An instance not seen for this long no longer counts as alive.
pub(crate) const HEARTBEAT_TTL_SECS: u64 = 3;

/// The sorted set of live instances for keys under `prefix` (`CACHE_KEY_PREFIX`).
pub(crate) fn instances_key(prefix: &str) -> String {
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

/// Reads whether the local fallback can be used now: true while `DEFAULT_FAILURE_MODE` or some
/// limit of the live configuration says `local`. The store sits below the configuration, so the
/// heartbeat is handed this reader rather than the configuration itself.
pub(crate) type FallbackWanted = Arc<dyn Fn() -> bool + Send + Sync>;

/// What the heartbeat shares with the rest of the process.
#[derive(Debug)]
pub(crate) struct HeartbeatDeps<'a> {
    /// The store whose main Redis holds the instances' set.
    pub redis: &'a Arc<RedisStore>,
    /// The fallback whose instance count the heartbeat keeps.
    pub fallback: &'a Arc<LocalFallback>,
    /// The clock of decisions (the set's scores).
    pub clock: &'a Arc<dyn Clock>,
    /// Where the heartbeat runs.
    pub background: Background<'a>,
}

/// Starts the heartbeat of this instance in the set for keys under `prefix`
/// (`CACHE_KEY_PREFIX`). It beats only while `wanted` says so: a deployment that never falls
/// back locally writes no instance key.
pub(crate) fn start(prefix: &str, wanted: FallbackWanted, deps: HeartbeatDeps<'_>) {
    let HeartbeatDeps {
        redis,
        fallback,
        clock,
        background: mut bg,
    } = deps;
    let beat = Beat {
        redis: redis.clone(),
        fallback: fallback.clone(),
        clock: clock.clone(),
        key: instances_key(prefix),
    };
    bg.spawn(beat.run(wanted, bg.stopped()));
}

/// What the heartbeat announces through and updates.
struct Beat {
    redis: Arc<RedisStore>,
    fallback: Arc<LocalFallback>,
    clock: Arc<dyn Clock>,
    /// The instances' sorted set (`CACHE_KEY_PREFIX` in front).
    key: String,
}

impl Beat {
    /// Announces this instance through Redis once a second and keeps the local fallback's
    /// instance count; once Redis answers every target again, drops the fallback's local counts
    /// (the store's counts are the truth again). A failed heartbeat keeps the last count and logs
    /// nothing (the breakers log the outage once).
    async fn run(self, wanted: FallbackWanted, stop: impl Future<Output = ()>) {
        let Beat {
            redis,
            fallback,
            clock,
            key,
        } = self;
        let id = format!("{:016x}", fastrand::u64(..));
        every_second(stop, || async {
            if !wanted() {
                return;
            }
            if let Ok(live) = redis.heartbeat(&key, &id, clock.now()).await {
                fallback.instances().seen(live);
                if redis.is_healthy() && !fallback.is_empty() {
                    let dropped = fallback.forget();
                    tracing::info!(
                        keys = dropped,
                        "Redis is back: local fallback counts dropped"
                    );
                }
            }
        })
        .await;
    }
}
