//! The Rate Limit Quota Service's wiring for the gRPC port (`RLQS_ENABLED`): its demand board
//! (through Redis when the store is Redis, so the fleet splits one budget), built while the store
//! is at hand, and the service, added to the gRPC router once the overrides and the decision
//! clock are known.

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

/// What the service is built from, gathered before the store's parts move on.
pub(super) struct Wiring {
    settings: Settings,
    board: Board,
    config: Arc<ConfigHandle>,
    metrics: Option<Arc<Metrics>>,
    stop: watch::Receiver<bool>,
}

impl Wiring {
    /// The demand board is Redis's when there is one, else this process's.
    pub(super) fn new(
        settings: &Settings,
        redis: Option<&Arc<RedisStore>>,
        (config, metrics): (&Arc<ConfigHandle>, &Option<Arc<Metrics>>),
        stop: &watch::Receiver<bool>,
    ) -> Wiring {
        let local = Arc::new(MemoryBoard::default());
        let board = match redis {
            Some(r) => Board::Redis(r.clone(), local),
            None => Board::Memory(local),
        };
        Wiring {
            settings: settings.clone(),
            board,
            config: config.clone(),
            metrics: metrics.clone(),
            stop: stop.clone(),
        }
    }

    /// The service, or `None` with `RLQS_ENABLED=false`.
    pub(super) fn service(
        self,
        overrides: &Arc<Overrides>,
        clock: &Arc<dyn Clock>,
    ) -> Option<Tracked<RateLimitQuotaServiceServer<RlqsService>>> {
        let settings = self.settings;
        if !settings.rlqs.enabled {
            return None;
        }
        let shared = Arc::new(Shared {
            config: self.config,
            overrides: overrides.clone(),
            keys: super::parts::limiter_options(&settings).keys,
            board: self.board,
            clock: clock.clone(),
            settings: settings.rlqs.clone(),
            prefix: settings.cache_key_prefix.clone(),
            metrics: self.metrics,
        });
        Some(Tracked(
            RateLimitQuotaServiceServer::new(RlqsService::new(shared, self.stop))
                .max_decoding_message_size(settings.grpc.max_recv_message_bytes),
        ))
    }
}
