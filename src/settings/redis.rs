//! Redis settings, read the same way for the main Redis (`REDIS_*`) and the optional per-second
//! Redis (`REDIS_PERSECOND_*`), with the Go service's names and defaults.

use std::path::PathBuf;
use std::time::Duration;

use super::{Secret, SettingsError, Vars, parse};

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

fn kind(s: &str) -> Result<RedisKind, String> {
    match s.to_ascii_lowercase().as_str() {
        "single" => Ok(RedisKind::Single),
        "sentinel" => Ok(RedisKind::Sentinel),
        "cluster" => Ok(RedisKind::Cluster),
        _ => Err("expected single, sentinel or cluster".into()),
    }
}

fn socket(s: &str) -> Result<bool, String> {
    match s {
        "unix" => Ok(true),
        "tcp" => Ok(false),
        _ => Err("expected unix or tcp".into()),
    }
}

/// Go's pool tuning (`*_POOL_ON_EMPTY_BEHAVIOR`, `*_PIPELINE_WINDOW`, `*_PIPELINE_LIMIT`,
/// `*_CLUSTER_PIPELINE_PARALLELISM`): the connections here are multiplexed and never run empty,
/// and commands are pipelined as they come, so there is nothing to tune; the values are still
/// checked as Go checks them, so a value Go refuses is refused here too.
fn go_pool_tuning(v: &Vars, prefix: &str) -> Result<(), SettingsError> {
    let name = |n: &str| format!("{prefix}{n}");
    v.parse(&name("POOL_ON_EMPTY_BEHAVIOR"), (), |s| {
        match s.to_ascii_uppercase().as_str() {
            "CREATE" | "ERROR" => Err("the Go service stops on CREATE and ERROR (its pool only \
                 waits); unset it or use WAIT (connections here are multiplexed and never run out)"
                .into()),
            _ => Ok(()),
        }
    })?;
    v.parse(&name("PIPELINE_WINDOW"), Duration::ZERO, parse::go_duration)?;
    v.parse(&name("PIPELINE_LIMIT"), 0, |s| {
        parse::uint_in(s, 0, u64::MAX)
    })?;
    v.parse(&name("CLUSTER_PIPELINE_PARALLELISM"), 1, |s| {
        parse::uint_in(s, 0, u64::MAX).map_err(|e| format!("{e} (Go stops on a negative value)"))
    })?;
    Ok(())
}

/// One Redis deployment's `{prefix}*` variables (the main, per-second and global Redis).
pub(super) fn one(
    v: &Vars,
    prefix: &str,
    default_url: &str,
) -> Result<RedisSettings, SettingsError> {
    let name = |n: &str| format!("{prefix}{n}");
    go_pool_tuning(v, prefix)?;
    let s = RedisSettings {
        unix_socket: v.parse(&name("SOCKET_TYPE"), true, socket)?,
        kind: v.parse(&name("TYPE"), RedisKind::Single, kind)?,
        url: v.string(&name("URL"), default_url),
        pool_size: v.parse(&name("POOL_SIZE"), 10, |s| parse::uint_in(s, 1, 1024))? as usize,
        auth: Secret(v.string(&name("AUTH"), "")),
        sentinel_auth: Secret(v.string(&name("SENTINEL_AUTH"), "")),
        tls: v.bool(&name("TLS"), false)?,
        connect_timeout: v.parse(
            &name("TIMEOUT"),
            Duration::from_secs(10),
            parse::go_duration,
        )?,
    };
    let items = s.url.split(',').filter(|p| !p.is_empty()).count();
    if s.kind == RedisKind::Sentinel && items < 2 {
        return Err(SettingsError {
            name: name("URL"),
            value: s.url,
            also: Vec::new(),
            reason: "sentinel needs master_name,host:port[,host:port...]".into(),
        });
    }
    Ok(s)
}

fn path(v: &Vars, name: &str) -> Option<PathBuf> {
    v.get(name)
        .filter(|(p, _)| !p.is_empty())
        .map(|(p, _)| PathBuf::from(p))
}

/// Sentinel with TLS cannot skip only the hostname check (the Redis client probes the primary
/// with full verification before handing it over): refuse at startup rather than let the setting
/// mean something else.
fn check_sentinel_tls(c: &RedisConfig) -> Result<(), SettingsError> {
    let targets = std::iter::once(&c.main).chain(c.per_second.as_ref());
    refuse_sentinel_tls_skip(c.tls.skip_hostname_verification, targets)
}

/// The rule of [`check_sentinel_tls`] for any Redis deployments (the global store's too).
pub(super) fn refuse_sentinel_tls_skip<'a>(
    skip_hostname_verification: bool,
    mut targets: impl Iterator<Item = &'a RedisSettings>,
) -> Result<(), SettingsError> {
    let sentinel_tls = |s: &RedisSettings| s.kind == RedisKind::Sentinel && s.tls;
    if skip_hostname_verification && targets.any(sentinel_tls) {
        return Err(SettingsError {
            name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION".into(),
            value: "true".into(),
            also: Vec::new(),
            reason: "not supported with REDIS_TYPE=sentinel and REDIS_TLS=true (the primary's \
                     certificate is always checked against the address Sentinel reports); give \
                     it a certificate for that address or unset this variable"
                .into(),
        });
    }
    Ok(())
}

impl RedisConfig {
    pub(super) fn from_vars(v: &Vars) -> Result<RedisConfig, SettingsError> {
        let c = RedisConfig::read(v)?;
        check_sentinel_tls(&c)?;
        Ok(c)
    }

    fn read(v: &Vars) -> Result<RedisConfig, SettingsError> {
        let d = |n: &str, def: u64| v.parse(n, Duration::from_secs(def), parse::go_duration);
        Ok(RedisConfig {
            main: one(v, "REDIS_", "/var/run/nutcracker/ratelimit.sock")?,
            per_second: if v.bool("REDIS_PERSECOND", false)? {
                Some(one(
                    v,
                    "REDIS_PERSECOND_",
                    "/var/run/nutcracker/ratelimitpersecond.sock",
                )?)
            } else {
                None
            },
            tls: RedisTls {
                client_cert: path(v, "REDIS_TLS_CLIENT_CERT"),
                client_key: path(v, "REDIS_TLS_CLIENT_KEY"),
                ca_cert: path(v, "REDIS_TLS_CACERT"),
                skip_hostname_verification: v
                    .bool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)?,
            },
            response_timeout: v.parse(
                "REDIS_RESPONSE_TIMEOUT",
                Duration::from_millis(15),
                parse::go_duration,
            )?,
            startup_initial_interval: d("REDIS_STARTUP_INITIAL_INTERVAL", 1)?,
            startup_max_interval: d("REDIS_STARTUP_MAX_INTERVAL", 30)?,
            startup_max_elapsed: d("REDIS_STARTUP_MAX_ELAPSED_TIME", 0)?,
            local_cache_size_in_bytes: v.parse("LOCAL_CACHE_SIZE_IN_BYTES", 0, |s| {
                parse::uint_in(s, 0, u64::MAX)
            })?,
            use_server_time: v.bool("REDIS_USE_SERVER_TIME", false)?,
            // Go's active-connection health tracking: health here always follows the calls
            // made and a periodic PING, so either value gives that behaviour.
            health_check_active_connection: v
                .bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false)?,
            stop_increment_when_over_limit: v
                .bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false)?,
            expiration_jitter_max_seconds: v.parse("EXPIRATION_JITTER_MAX_SECONDS", 300, |s| {
                parse::uint_in(s, 0, u64::MAX)
            })?,
            lease_default_size: v.parse("LEASE_DEFAULT_SIZE", 0, |s| {
                parse::uint_in(s, 0, u64::from(crate::store::lease::MAX_LEASE))
            })? as u32,
            main_prefix: "REDIS_",
        })
    }
}
