//! Which store holds the counters, and what a remote store (Redis, memcached) does when it
//! cannot answer: the circuit breaker put around each target, and the failure mode of limits
//! that name none. Read from `BACKEND_TYPE` (or `REDIS_URL`), `REDIS_BREAKER_*` and
//! `DEFAULT_FAILURE_MODE` by the settings.

use std::time::Duration;

use ratelimitd_core::config::FailureMode;

/// Where counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded in-process store.
    Memory,
    /// Redis.
    Redis,
    /// Memcached (`MEMCACHE_*`): fixed windows only, Go's keys.
    Memcache,
    /// Amazon DynamoDB (`DYNAMODB_*`, feature `dynamodb`).
    Dynamodb,
}

/// The breaker and fallback settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resilience {
    /// `REDIS_BREAKER_FAILURES`: failure events in a row on one Redis target that open its
    /// breaker, and failed probes in a row that reopen it (0 = no breaker). Calls that fail
    /// together are one event; see `resilience::breaker`.
    pub breaker_failures: u32,
    /// `REDIS_BREAKER_COOLDOWN`: how long an open breaker answers without trying Redis before it
    /// lets probe calls through, one at a time.
    pub breaker_cooldown: Duration,
    /// `DEFAULT_FAILURE_MODE`: the failure mode of limits that do not set `failure_mode`.
    pub default_failure_mode: FailureMode,
}

impl Default for Resilience {
    fn default() -> Resilience {
        Resilience {
            breaker_failures: 3,
            breaker_cooldown: Duration::from_millis(500),
            default_failure_mode: FailureMode::Error,
        }
    }
}
