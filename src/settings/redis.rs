//! Redis settings, read the same way for the main Redis (`REDIS_*`) and the optional per-second
//! Redis (`REDIS_PERSECOND_*`), with the Go service's names and defaults.

use std::path::PathBuf;
use std::time::Duration;

use super::{Secret, SettingsError, Vars, parse};

pub(crate) use crate::store::redis::{RedisConfig, RedisKind, RedisSettings, RedisTls};

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
                parse::uint_in(s, 0, u64::from(ratelimitd_core::store::lease::MAX_LEASE))
            })? as u32,
            main_prefix: "REDIS_",
        })
    }
}
