//! Builds the Rate Limit Quota Service for the gRPC port (`RLQS_ENABLED`): its demand board
//! (through Redis when the store is Redis, so the fleet splits one budget) and the service.

use std::sync::Arc;

use tokio::sync::watch;

use super::grpc_idle::Tracked;
use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::policy::Overrides;
use crate::reload::ConfigHandle;
use crate::rlqs::{Board, MemoryBoard, RateLimitQuotaServiceServer, RlqsService, Shared};
use crate::settings::Settings;
use crate::store::redis::RedisStore;

/// The demand board: Redis's when there is one, else this process's.
pub(super) fn board(redis: Option<&Arc<RedisStore>>) -> Board {
    let local = Arc::new(MemoryBoard::default());
    match redis {
        Some(r) => Board::Redis(r.clone(), local),
        None => Board::Memory(local),
    }
}

/// The service, or `None` with `RLQS_ENABLED=false`.
pub(super) fn service(
    settings: &Settings,
    (config, overrides, clock): (&Arc<ConfigHandle>, &Arc<Overrides>, &Arc<dyn Clock>),
    (board, metrics): (Board, &Option<Arc<Metrics>>),
    stop: &watch::Receiver<bool>,
) -> Option<Tracked<RateLimitQuotaServiceServer<RlqsService>>> {
    if !settings.rlqs.enabled {
        return None;
    }
    let shared = Arc::new(Shared {
        config: config.clone(),
        overrides: overrides.clone(),
        keys: super::parts::limiter_options(settings).keys,
        board,
        clock: clock.clone(),
        settings: settings.rlqs.clone(),
        prefix: settings.cache_key_prefix.clone(),
        metrics: metrics.clone(),
    });
    Some(Tracked(
        RateLimitQuotaServiceServer::new(RlqsService::new(shared, stop.clone()))
            .max_decoding_message_size(settings.grpc.max_recv_message_bytes),
    ))
}
