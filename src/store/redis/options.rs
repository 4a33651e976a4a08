//! How the Redis store connects and behaves: each deployment (single, Sentinel, Cluster; the
//! main and the per-second one), TLS, timeouts, startup retries, the local over-limit cache,
//! server time, leases. Read from `REDIS_*`, `REDIS_PERSECOND_*` and the few Go variables that
//! tune the store by the settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::secret::Secret;

/// How Redis is deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisKind {
    /// One server (or a proxy such as twemproxy).
    Single,
    /// Sentinel-managed primary: `REDIS_URL` is `master_name,host:port,host:port...`.
    Sentinel,
    /// Redis Cluster: `REDIS_URL` is `host:port,host:port...`.
    Cluster,
}

/// One Redis deployment to connect to.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `*_SOCKET_TYPE`: `unix` or `tcp`.
    pub unix_socket: bool,
    /// `*_TYPE`.
    pub kind: RedisKind,
    /// `*_URL`.
    pub url: String,
    /// `*_POOL_SIZE`: number of multiplexed connections to spread commands over.
    pub pool_size: usize,
    /// `*_AUTH`: `password` or `user:password`.
    pub auth: Secret,
    /// `*_SENTINEL_AUTH`: password for the sentinel nodes.
    pub sentinel_auth: Secret,
    /// `*_TLS`.
    pub tls: bool,
    /// `*_TIMEOUT`: connect (dial) timeout.
    pub connect_timeout: Duration,
}

/// TLS material shared by both Redis connections (`REDIS_TLS_*`).
#[derive(Debug, Clone, Default)]
pub struct RedisTls {
    /// `REDIS_TLS_CLIENT_CERT` (PEM).
    pub client_cert: Option<PathBuf>,
    /// `REDIS_TLS_CLIENT_KEY` (PEM).
    pub client_key: Option<PathBuf>,
    /// `REDIS_TLS_CACERT` (PEM), trusted in addition to the system roots.
    pub ca_cert: Option<PathBuf>,
    /// `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`: verify the chain, not the name.
    pub skip_hostname_verification: bool,
}

/// Everything about Redis.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// The main Redis.
    pub main: RedisSettings,
    /// `REDIS_PERSECOND=true`: a separate Redis for limits with windows under a minute.
    pub per_second: Option<RedisSettings>,
    /// TLS files.
    pub tls: RedisTls,
    /// `REDIS_RESPONSE_TIMEOUT` (ratelimitd): the longest one store call may take before the
    /// request is answered by the failure policy. Well under Envoy's 20 ms default filter timeout.
    pub response_timeout: Duration,
    /// `REDIS_STARTUP_INITIAL_INTERVAL`, `_MAX_INTERVAL`, `_MAX_ELAPSED_TIME` (0 = retry forever).
    pub startup_initial_interval: Duration,
    /// See `startup_initial_interval`.
    pub startup_max_interval: Duration,
    /// See `startup_initial_interval`.
    pub startup_max_elapsed: Duration,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: memory for the local over-limit cache (0 = off).
    pub local_cache_size_in_bytes: u64,
    /// `REDIS_USE_SERVER_TIME` (ratelimitd): decide by the main Redis's clock (`TIME`) instead of
    /// this host's, so instances with skewed clocks still share windows and buckets.
    pub use_server_time: bool,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`.
    pub stop_increment_when_over_limit: bool,
    /// `EXPIRATION_JITTER_MAX_SECONDS`.
    pub expiration_jitter_max_seconds: u64,
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`: read and kept for parity; health already follows
    /// the connections' calls and a periodic PING whatever its value.
    pub health_check_active_connection: bool,
    /// `LEASE_DEFAULT_SIZE` (ratelimitd): the token lease of fixed window limits that do not set
    /// `lease` (0 = off; see `store::lease`).
    pub lease_default_size: u32,
    /// The prefix of the variables `main` was read from, for messages (`REDIS_`, or
    /// `GLOBAL_REDIS_` for the regions' global store).
    pub main_prefix: &'static str,
}
