//! A Redis connection still being made. With `REDIS_STARTUP_MAX_ELAPSED_TIME=0` (the default) the
//! service does not wait for Redis before opening its ports: a target that does not answer the
//! first attempt becomes a [`Pending`] connection, a background task keeps dialling it with the
//! startup backoff, and until it succeeds every call fails at once — so requests are answered by
//! their failure mode, the breaker and readiness see an outage, and nothing blocks. Once the dial
//! succeeds the connection is used as if it had been made at startup; nothing restarts.

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use redis::RedisError;

use super::RedisTls;
use super::conn::{RedisConn, connect};
use super::describe::Target;

/// The backoff of the background dial: `REDIS_STARTUP_INITIAL_INTERVAL` doubling up to
/// `REDIS_STARTUP_MAX_INTERVAL`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

/// A connection that is not made yet.
pub(crate) struct Pending {
    ready: OnceLock<RedisConn>,
    target: Target,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("target", &self.target.describe())
            .field("connected", &self.ready.get().is_some())
            .finish()
    }
}

impl Pending {
    /// The connection, once the dial succeeded.
    pub(super) fn ready(&self) -> Option<&RedisConn> {
        self.ready.get()
    }

    /// The error every call gets until the connection is made: names the target, so a log line
    /// or a readiness body says what is being waited for.
    pub(super) fn not_connected(&self) -> RedisError {
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            format!("not connected yet to {}", self.target.describe()),
        ))
    }
}

/// Starts dialling `target` in the background (the caller's first attempt failed with `first`)
/// and returns the connection to use meanwhile. The task stops once connected, or once the store
/// holding the connection is gone.
pub(super) fn dial_in_background(
    target: Target,
    tls: RedisTls,
    response_timeout: Duration,
    backoff: Backoff,
    first: &RedisError,
) -> RedisConn {
    tracing::warn!(
        target_redis = %target.describe(),
        error = %target.explain(first),
        retry_in = ?backoff.initial,
        "cannot reach Redis yet; serving by the failure mode while connecting in the background"
    );
    let pending = Arc::new(Pending {
        ready: OnceLock::new(),
        target,
    });
    tokio::spawn(dial(
        Arc::downgrade(&pending),
        tls,
        response_timeout,
        backoff,
    ));
    RedisConn::Pending(pending)
}

async fn dial(pending: Weak<Pending>, tls: RedisTls, response_timeout: Duration, b: Backoff) {
    let mut wait = b.initial.max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(wait).await;
        let Some(p) = pending.upgrade() else { return };
        match connect(&p.target.settings, &tls, response_timeout).await {
            Ok(conn) => {
                tracing::info!(target_redis = %p.target.describe(), "connected to Redis");
                let _ = p.ready.set(conn);
                return;
            }
            Err(e) => {
                wait = (wait * 2).min(b.max.max(wait));
                tracing::warn!(
                    target_redis = %p.target.describe(),
                    error = %p.target.explain(&e),
                    retry_in = ?wait,
                    "cannot reach Redis yet"
                );
            }
        }
    }
}
