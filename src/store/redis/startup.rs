//! Making the Redis store: connecting to each target (the main Redis, and the per-second one with
//! `REDIS_PERSECOND=true`) either at once, retrying as Go does, or — by default — with one short
//! attempt and then in the background ([`super::pending`]), so the ports never wait for Redis.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use redis::RedisError;

use super::conn::{self, RedisConn};
use super::{
    Deadlines, RedisConfig, RedisStore, bucket_lease, concurrency, describe, fixed_window,
    leaky_bucket, lease, pending, quota_demand, sliding_log, sliding_window, token_bucket,
};
use ratelimitd_core::clock::Stopwatch;
use ratelimitd_core::store::StoreError;
use ratelimitd_core::store::lease::Leases;
use ratelimitd_core::store::local_cache::OverLimitCache;

impl RedisStore {
    /// Connects once to every configured Redis; fails if one cannot be reached now.
    pub async fn connect(cfg: &RedisConfig) -> Result<RedisStore, StoreError> {
        let dial = |t: describe::Target| async move {
            let conn = conn::connect(&t.settings, &cfg.tls, cfg.response_timeout).await;
            conn.map_err(|e| StoreError::Unavailable(format!("redis connect {}", t.explain(&e))))
        };
        let main = dial(main_target(cfg)).await?;
        let per_second = match per_second_target(cfg) {
            Some(t) => Some(dial(t).await?),
            None => None,
        };
        Ok(RedisStore::over(cfg, main, per_second).await)
    }

    /// Connects as the startup settings ask. With `REDIS_STARTUP_MAX_ELAPSED_TIME=0` (the
    /// default) it never waits longer than one short first attempt: a Redis that does not answer
    /// it is dialled in the background ([`pending`]) and the store fails every call meanwhile,
    /// so the service opens its ports and answers by its failure modes. With a limit, it retries
    /// with backoff (`REDIS_STARTUP_*`) until Redis answers or the limit passes, as Go does.
    pub async fn start(cfg: &RedisConfig) -> Result<RedisStore, StoreError> {
        if !cfg.startup_max_elapsed.is_zero() {
            return RedisStore::connect_with_backoff(cfg).await;
        }
        let main = first_dial(main_target(cfg), cfg).await;
        let per_second = match per_second_target(cfg) {
            Some(t) => Some(first_dial(t, cfg).await),
            None => None,
        };
        Ok(RedisStore::over(cfg, main, per_second).await)
    }

    /// The store over its connections.
    async fn over(cfg: &RedisConfig, main: RedisConn, per_second: Option<RedisConn>) -> RedisStore {
        let store = RedisStore {
            main,
            per_second,
            fixed_window: fixed_window::script(),
            token_bucket: token_bucket::script(),
            sliding_window: sliding_window::script(),
            leaky_bucket: leaky_bucket::script(),
            sliding_log: sliding_log::script(),
            concurrency: concurrency::script(),
            lease: lease::script(),
            bucket_lease: bucket_lease::script(),
            leases: Leases::new(cfg.lease_default_size),
            quota_demand: quota_demand::script(),
            response_timeout: cfg.response_timeout,
            deadlines: Deadlines::new(cfg.response_timeout),
            joiner: super::join::Joiner::new(cfg.response_timeout),
            stop_increment_when_over_limit: cfg.stop_increment_when_over_limit,
            jitter_max_secs: cfg.expiration_jitter_max_seconds,
            local_cache: OverLimitCache::with_bytes(cfg.local_cache_size_in_bytes),
            healthy: AtomicBool::new(true),
            breakers: None,
            slots: Default::default(),
        };
        store.check_health().await;
        store
    }

    /// Connects at startup, retrying with exponential backoff as the Go service does
    /// (`REDIS_STARTUP_*`; a max elapsed time of 0 retries forever).
    pub async fn connect_with_backoff(cfg: &RedisConfig) -> Result<RedisStore, StoreError> {
        let started = Stopwatch::start();
        let mut wait = cfg.startup_initial_interval.max(Duration::from_millis(10));
        loop {
            match RedisStore::connect(cfg).await {
                Ok(s) => return Ok(s),
                Err(e) => {
                    let limit = cfg.startup_max_elapsed;
                    if !limit.is_zero() && started.elapsed() + wait > limit {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, retry_in = ?wait, "cannot reach Redis yet");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(cfg.startup_max_interval.max(wait));
                }
            }
        }
    }

    /// The Redis targets, named by the settings that chose them (for the startup banner).
    pub fn describe_targets(cfg: &RedisConfig) -> Vec<String> {
        let main = main_target(cfg).describe();
        std::iter::once(main)
            .chain(per_second_target(cfg).map(|t| t.describe()))
            .collect()
    }
}

/// The longest first connection attempt when startup does not wait for Redis.
const FIRST_DIAL: Duration = Duration::from_secs(2);

/// The main Redis, named by its settings' prefix.
fn main_target(cfg: &RedisConfig) -> describe::Target {
    describe::Target {
        prefix: cfg.main_prefix,
        settings: cfg.main.clone(),
    }
}

/// The per-second Redis (`REDIS_PERSECOND=true`), named by its settings' prefix.
fn per_second_target(cfg: &RedisConfig) -> Option<describe::Target> {
    cfg.per_second.clone().map(|settings| describe::Target {
        prefix: "REDIS_PERSECOND_",
        settings,
    })
}

/// One short attempt at `t`; when it fails, a connection dialled in the background instead.
async fn first_dial(t: describe::Target, cfg: &RedisConfig) -> RedisConn {
    // Long enough for a handshake with a live Redis, short enough not to hold the ports.
    let first = t.settings.connect_timeout.min(FIRST_DIAL);
    let dial = conn::connect(&t.settings, &cfg.tls, cfg.response_timeout);
    let failed = match tokio::time::timeout(first, dial).await {
        Ok(Ok(c)) => return c,
        Ok(Err(e)) => e,
        Err(_) => RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no connection within {first:?}"),
        )),
    };
    let backoff = pending::Backoff {
        initial: cfg.startup_initial_interval,
        max: cfg.startup_max_interval,
    };
    let (tls, timeout) = (cfg.tls.clone(), cfg.response_timeout);
    pending::dial_in_background(t, tls, timeout, backoff, &failed)
}
