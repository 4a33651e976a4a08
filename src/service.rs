//! The service both edges call: take one configuration snapshot, then decide with the limiter.

use std::sync::Arc;

use crate::reload::ConfigHandle;
use ratelimitd_core::limiter::{RateLimiter, Request, RequestError, Response};

/// The rate limit service behind gRPC and `/json`.
#[derive(Debug)]
pub struct Service {
    /// The decision engine.
    pub limiter: RateLimiter,
    /// The live configuration.
    pub config: Arc<ConfigHandle>,
}

impl Service {
    /// Decides `req` against the configuration current when it arrives. The snapshot is an owned
    /// `Arc`, so a reload during the store call does not affect this request.
    pub async fn should_rate_limit(&self, req: &Request) -> Result<Response, RequestError> {
        let snapshot = self.config.snapshot();
        self.limiter
            .should_rate_limit(snapshot.as_deref().map(|s| &s.config), req)
            .await
    }
}
