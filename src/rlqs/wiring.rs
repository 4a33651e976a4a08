//! The Rate Limit Quota Service's part of startup (`RLQS_ENABLED`): its demand board (through
//! Redis when the store is Redis, so the fleet splits one budget) and the service, for the
//! composition root to add to the gRPC router.

use std::sync::Arc;

use tokio::sync::watch;

use super::{
    Board, MemoryBoard, RateLimitQuotaServiceServer, RlqsMetrics, RlqsOptions, RlqsService, Shared,
};
use crate::metrics::Metrics;
use crate::policy::Overrides;
use crate::reload::ConfigHandle;
use crate::store::redis::RedisStore;
use ratelimitd_core::clock::Clock;
use ratelimitd_core::limiter::KeyBuilder;

/// What the service shares with the rest of the process (handles only, so it is `Copy`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RlqsDeps<'a> {
    /// The Redis store, whose demand board the fleet shares; `None` on the memory store.
    pub redis: Option<&'a Arc<RedisStore>>,
    /// The live configuration.
    pub config: &'a Arc<ConfigHandle>,
    /// Stored overrides, applied as for `ShouldRateLimit`.
    pub overrides: &'a Arc<Overrides>,
    /// The decision clock.
    pub clock: &'a Arc<dyn Clock>,
    /// The limiter's cache-key builder (planning builds keys; RLQS does not count with them).
    pub keys: &'a KeyBuilder,
    /// `CACHE_KEY_PREFIX`, in front of the demand board's keys.
    pub prefix: &'a str,
    /// The stats its counters register with (`None` with `DISABLE_STATS`).
    pub metrics: &'a Option<Arc<Metrics>>,
    /// The gRPC port's largest request message (`GRPC_MAX_RECV_MSG_SIZE`).
    pub max_recv_message_bytes: usize,
    /// Shutdown: open streams end when it turns true.
    pub stop: &'a watch::Receiver<bool>,
}

/// The service, or `None` with `RLQS_ENABLED=false`. Its metrics are registered either way (the
/// gauges then read 0), as they always were.
pub(crate) fn start(
    options: &RlqsOptions,
    deps: RlqsDeps<'_>,
) -> Option<RateLimitQuotaServiceServer<RlqsService>> {
    let counters = deps.metrics.as_ref().map(|m| {
        let counters = RlqsMetrics::default();
        m.register(Arc::new(counters.clone()));
        counters
    });
    if !options.enabled {
        return None;
    }
    let RlqsDeps {
        redis,
        config,
        overrides,
        clock,
        keys,
        prefix,
        metrics: _,
        max_recv_message_bytes,
        stop,
    } = deps;
    let local = Arc::new(MemoryBoard::default());
    let board = match redis {
        Some(r) => Board::Redis(r.clone(), local),
        None => Board::Memory(local),
    };
    let shared = Arc::new(Shared {
        config: config.clone(),
        overrides: overrides.clone(),
        keys: keys.clone(),
        board,
        clock: clock.clone(),
        options: options.clone(),
        prefix: prefix.to_string(),
        metrics: counters,
    });
    Some(
        RateLimitQuotaServiceServer::new(RlqsService::new(shared, stop.clone()))
            .max_decoding_message_size(max_recv_message_bytes),
    )
}
