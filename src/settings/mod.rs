//! Settings: the Go service's environment variables (same names, same value syntax, same defaults),
//! overridden by command-line flags. Invalid values are startup errors naming the variable.

pub(crate) mod admin;
pub(crate) mod cli;
mod config_files;
pub(crate) mod dynamodb;
pub(crate) mod edges;
pub(crate) mod fleet;
pub(crate) mod grpc;
pub(crate) mod insight;
pub(crate) mod kinds;
pub(crate) mod limits;
pub(crate) mod listeners;
pub(crate) mod memcache;
pub(crate) mod observability;
pub(crate) mod parse;
pub(crate) mod policy;
pub(crate) mod redis;
pub(crate) mod reference;
pub(crate) mod region;
pub(crate) mod resilience;
pub(crate) mod rlqs;
mod test_hooks;
mod vars;
pub(crate) mod violations;
pub(crate) mod xds;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) use admin::AdminSettings;
pub use cli::{Cli, Command, ExplainArgs, ResetArgs};
pub(crate) use edges::EdgeSettings;
pub(crate) use grpc::GrpcServerSettings;
pub(crate) use kinds::{Backend, KeyFormat, LogFormat, LogLevel, Secret, StatsdProtocol};
pub(crate) use limits::Limits;
pub(crate) use listeners::Listeners;
pub(crate) use memcache::MemcacheSettings;
pub(crate) use observability::Observability;
pub(crate) use policy::PolicySettings;
pub(crate) use redis::{RedisConfig, RedisKind};
pub(crate) use region::RegionSettings;
pub(crate) use resilience::Resilience;
pub(crate) use xds::{ConfigType, XdsSettings};

use kinds::{backend, key_format, log_format, log_level};
use vars::Vars;

/// A bad setting, and every other bad setting found in the same pass (so a deploy is fixed in one
/// round instead of one variable per restart).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} for {name}: {reason}{}", others(.also))]
pub struct SettingsError {
    /// The variable (and flag, when it came from one).
    pub name: String,
    /// The value given.
    pub value: String,
    /// What was expected.
    pub reason: String,
    /// The other bad settings, in the order they were read.
    pub also: Vec<SettingsError>,
}

/// The other errors, one per line after the first.
fn others(also: &[SettingsError]) -> String {
    also.iter().map(|e| format!("\n{e}")).collect()
}

/// Every setting of the service. Field docs name the environment variable.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `HOST`: the address of `/json` and `/healthcheck`.
    pub host: String,
    /// `PORT`: their port.
    pub port: u16,
    /// `GRPC_HOST`.
    pub grpc_host: String,
    /// `GRPC_PORT`.
    pub grpc_port: u16,
    /// `GRPC_UDS`, `GRPC_MAX_CONNECTION_AGE[_GRACE]`, `GRPC_SERVER_USE_TLS` and the TLS files.
    pub grpc: GrpcServerSettings,
    /// `DEBUG_HOST`.
    pub debug_host: String,
    /// `DEBUG_PORT`.
    pub debug_port: u16,
    /// `ADMIN_HOST` (default `127.0.0.1`) / `ADMIN_PORT` (default 6071): the admin surface
    /// (`/v1/*`), on its own listener so that it stays on loopback while the Go-compatible debug
    /// port keeps `0.0.0.0` for probes and scrapers.
    pub admin_host: String,
    /// `ADMIN_PORT` (see `admin_host`).
    pub admin_port: u16,
    /// Whether `ADMIN_PORT` (or `--admin-port`) was given: the admin listener is then opened even
    /// when nothing on it could be served (no admin token, loopback not trusted).
    pub admin_port_set: bool,
    /// `ADMIN_ALLOWED_HOSTS`, `ADMIN_TRUST_LOOPBACK`: who reaches the admin listener (`admin`).
    pub admin: AdminSettings,
    /// `LOG_LEVEL`.
    pub log_level: LogLevel,
    /// `LOG_FORMAT`.
    pub log_format: LogFormat,
    /// `RATELIMITD_CONFIG` / `--config`: explicit config file or directory.
    pub config_path: Option<PathBuf>,
    /// `RUNTIME_ROOT`: Go config discovery starts here.
    pub runtime_root: PathBuf,
    /// `RUNTIME_SUBDIRECTORY`.
    pub runtime_subdirectory: String,
    /// `RUNTIME_APPDIRECTORY`.
    pub runtime_appdirectory: String,
    /// `RUNTIME_WATCH_ROOT`.
    pub runtime_watch_root: bool,
    /// `RUNTIME_IGNOREDOTFILES`.
    pub runtime_ignoredotfiles: bool,
    /// `MERGE_DOMAIN_CONFIG`.
    pub merge_domain_config: bool,
    /// `CALENDAR_TIME_ZONE` (UTC): the zone of calendar windows that name no `time_zone`.
    pub calendar_time_zone: &'static ratelimitd_core::algorithm::calendar::Zone,
    /// `ALLOW_EMPTY_CONFIG` (default false): start (with a warning) when the files yield no
    /// domain, instead of refusing to.
    pub allow_empty_config: bool,
    /// `CONFIG_POLL_INTERVAL`: how often config files are re-read in case a change event was
    /// missed; `None` when set to 0 (events only).
    pub config_poll_interval: Option<Duration>,
    /// `CONFIG_MAX_FILE_BYTES`: the largest config file read; larger ones are refused unread.
    pub config_max_file_bytes: u64,
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG`.
    pub force_start_without_initial_config: bool,
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`.
    pub healthy_with_at_least_one_config_loaded: bool,
    /// `BACKEND_TYPE` (memory unless Redis is asked for).
    pub backend: Backend,
    /// Every `REDIS_*` setting (used when the backend is Redis).
    pub redis: RedisConfig,
    /// Every `MEMCACHE_*` setting (used when the backend is memcache).
    pub memcache: MemcacheSettings,
    /// Every `DYNAMODB_*` setting (used when the backend is dynamodb).
    pub dynamodb: dynamodb::DynamoSettings,
    /// The Redis circuit breakers and the default failure mode (`resilience`).
    pub resilience: Resilience,
    /// `MEMORY_MAX_KEYS`.
    pub memory_max_keys: usize,
    /// Caps on one request and on the embedded store's bytes (`limits`).
    pub limits: Limits,
    /// Connection caps and timeouts of every listener (`listeners`).
    pub listeners: Listeners,
    /// `CACHE_KEY_PREFIX`.
    pub cache_key_prefix: String,
    /// `CACHE_KEY_FORMAT`.
    pub cache_key_format: KeyFormat,
    /// `NEAR_LIMIT_RATIO`.
    pub near_limit_ratio: f32,
    /// `SHADOW_MODE`.
    pub shadow_mode: bool,
    /// `QUOTA_MODE`.
    pub quota_mode: bool,
    /// `RESPONSE_DYNAMIC_METADATA`.
    pub response_dynamic_metadata: bool,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED`.
    pub limit_response_headers_enabled: bool,
    /// `LIMIT_LIMIT_HEADER`.
    pub limit_limit_header: String,
    /// `LIMIT_REMAINING_HEADER`.
    pub limit_remaining_header: String,
    /// `LIMIT_RESET_HEADER`.
    pub limit_reset_header: String,
    /// `RATELIMITD_TEST_MANUAL_CLOCK`: tests only; start on a manual clock at these Unix seconds
    /// (honoured by test builds only, next to a loopback `DEBUG_HOST`: `test_hooks`).
    pub test_manual_clock: Option<u64>,
    /// `SOFT_BREACH_RATIO`: the share of a limit from which answers carry the soft-breach signal,
    /// for limits that set no `soft.breach_ratio`; `None` (unset): only those limits raise it.
    pub soft_breach_ratio: Option<f64>,
    /// `RATELIMITD_TEST_RANDOM_SEED`: tests only (test builds); soft limits draw from a source
    /// seeded with this.
    pub test_random_seed: Option<u64>,
    /// `DRAIN_TIMEOUT`: how long in-flight requests may finish at shutdown.
    pub drain_timeout: Duration,
    /// `SHUTDOWN_DELAY`: how long, after SIGTERM, the service stays unready but keeps accepting
    /// and answering before it drains (0 = drain at once), so load balancers that still route to
    /// it during that time lose nothing.
    pub shutdown_delay: Duration,
    /// Stats sinks, stat-key bound and tracing (`observability`).
    pub obs: Observability,
    /// `CONFIG_TYPE`: files (default) or xDS.
    pub config_type: ConfigType,
    /// `CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*` (`xds`).
    pub xds: XdsSettings,
    /// `CHECK_*` and `LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED` (`edges`).
    pub edges: EdgeSettings,
    /// The policy database and its management API (`policy`).
    pub policy: PolicySettings,
    /// Hot keys and the sampled decision log (`insight`).
    pub insight: crate::insight::InsightOptions,
    /// The Rate Limit Quota Service (`RLQS_*`).
    pub rlqs: crate::rlqs::RlqsOptions,
    /// `REGION`, `GLOBAL_REDIS_*`, `REGION_SYNC_INTERVAL` (`region`).
    pub region: RegionSettings,
    /// The fleet mode of the embedded store (`FLEET_*`); `None` unless `FLEET_BIND` is set.
    pub fleet: Option<crate::fleet::FleetOptions>,
}

impl Settings {
    /// Settings from environment variables (pure: pass `std::env::vars()` or a test list).
    pub fn from_env(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let vars = vars.into_iter().map(|(k, v)| (k.clone(), (v, k))).collect();
        Settings::from_vars(&Vars::new(vars))
    }

    /// What logging and tracing are started with (`LOG_LEVEL`, `LOG_FORMAT`, `TRACING_*`).
    pub fn telemetry(&self) -> crate::telemetry::TelemetryOptions {
        crate::telemetry::TelemetryOptions {
            log_level: self.log_level,
            log_format: self.log_format,
            tracing: self.obs.tracing.clone(),
        }
    }

    /// Settings from the environment, then the command-line flags of `cli` on top.
    pub fn load(
        cli: &Cli,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, SettingsError> {
        let mut map: HashMap<String, (String, String)> =
            vars.into_iter().map(|(k, v)| (k.clone(), (v, k))).collect();
        for (flag, var, value) in cli.overrides() {
            map.insert(var.to_string(), (value, format!("{flag} ({var})")));
        }
        Settings::from_vars(&Vars::new(map))
    }

    /// The names of the environment variables the settings read when `vars` are set (some are
    /// read only when another setting asks for them, e.g. the xDS ones with
    /// `CONFIG_TYPE=GRPC_XDS_SOTW`), whether or not their values are valid.
    pub fn variables_read(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> std::collections::BTreeSet<String> {
        let vars = Vars::new(vars.into_iter().map(|(k, v)| (k.clone(), (v, k))).collect());
        let _ = Settings::read(&vars);
        vars.asked()
    }

    /// The defaults (no variables set).
    pub fn defaults() -> Settings {
        Settings::from_env(Vec::new()).unwrap_or_else(|e| unreachable!("defaults are valid: {e}"))
    }

    /// Reads every setting; a bad value is recorded and reading goes on (with the default in its
    /// place), so the error names every bad variable at once.
    fn from_vars(v: &Vars) -> Result<Settings, SettingsError> {
        let built = Settings::read(v);
        let mut errors = v.take_errors();
        match built {
            // A check across settings may have tripped over a default standing in for a bad
            // value; it is reported only when it is not already in the list.
            Err(e) if !errors.contains(&e) => errors.push(e),
            Ok(settings) if errors.is_empty() => return Ok(settings),
            _ => {}
        }
        let mut first = errors.remove(0);
        first.also = errors;
        Err(first)
    }

    fn read(v: &Vars) -> Result<Settings, SettingsError> {
        let backend = chosen_backend(v)?;
        let uint = |min, max| move |s: &str| parse::uint_in(s, min, max);
        let (config_type, xds) = xds::from_vars(v)?;
        let debug_host = v.string("DEBUG_HOST", "0.0.0.0");
        let hooks = test_hooks::from_vars(v, test_hooks::COMPILED, &debug_host)?;
        Ok(Settings {
            host: v.string("HOST", "0.0.0.0"),
            port: v.parse("PORT", 8080, parse::port)?,
            grpc_host: v.string("GRPC_HOST", "0.0.0.0"),
            grpc_port: v.parse("GRPC_PORT", 8081, parse::port)?,
            grpc: grpc::from_vars(v)?,
            debug_host,
            debug_port: v.parse("DEBUG_PORT", 6070, parse::port)?,
            admin_host: v.string("ADMIN_HOST", "127.0.0.1"),
            admin_port: v.parse("ADMIN_PORT", 6071, parse::port)?,
            admin_port_set: v.get("ADMIN_PORT").is_some(),
            admin: admin::from_vars(v)?,
            log_level: v.parse("LOG_LEVEL", LogLevel::Warn, log_level)?,
            log_format: v.parse("LOG_FORMAT", LogFormat::Text, log_format)?,
            config_path: v.get("RATELIMITD_CONFIG").map(|(p, _)| PathBuf::from(p)),
            runtime_root: PathBuf::from(v.string("RUNTIME_ROOT", "/srv/runtime_data/current")),
            runtime_subdirectory: v.string("RUNTIME_SUBDIRECTORY", ""),
            runtime_appdirectory: v.string("RUNTIME_APPDIRECTORY", "config"),
            runtime_watch_root: v.bool("RUNTIME_WATCH_ROOT", true)?,
            runtime_ignoredotfiles: v.bool("RUNTIME_IGNOREDOTFILES", false)?,
            merge_domain_config: v.bool("MERGE_DOMAIN_CONFIG", false)?,
            calendar_time_zone: config_files::calendar_time_zone(v)?,
            allow_empty_config: v.bool("ALLOW_EMPTY_CONFIG", false)?,
            config_poll_interval: config_poll_interval(v)?,
            config_max_file_bytes: config_files::max_file_bytes(v)?,
            force_start_without_initial_config: v
                .bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false)?,
            healthy_with_at_least_one_config_loaded: v
                .bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)?,
            backend,
            redis: RedisConfig::from_vars(v)?,
            memcache: memcache::from_vars(v, backend == Backend::Memcache)?,
            dynamodb: dynamodb::from_vars(v, backend == Backend::Dynamodb)?,
            resilience: resilience::from_vars(v)?,
            memory_max_keys: v.parse("MEMORY_MAX_KEYS", 1_000_000, uint(1, usize::MAX as u64))?
                as usize,
            limits: limits::from_vars(v)?,
            listeners: listeners::from_vars(v)?,
            cache_key_prefix: v.string("CACHE_KEY_PREFIX", ""),
            cache_key_format: cache_key_format(v, backend)?,
            near_limit_ratio: v.parse("NEAR_LIMIT_RATIO", 0.8, parse::ratio)?,
            shadow_mode: v.bool("SHADOW_MODE", false)?,
            quota_mode: v.bool("QUOTA_MODE", false)?,
            response_dynamic_metadata: v.bool("RESPONSE_DYNAMIC_METADATA", false)?,
            limit_response_headers_enabled: v.bool("LIMIT_RESPONSE_HEADERS_ENABLED", false)?,
            limit_limit_header: v.string("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
            limit_remaining_header: v.string("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
            limit_reset_header: v.string("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            test_manual_clock: hooks.manual_clock,
            soft_breach_ratio: v.parse("SOFT_BREACH_RATIO", None, parse::breach_ratio)?,
            test_random_seed: hooks.random_seed,
            drain_timeout: v.parse("DRAIN_TIMEOUT", Duration::from_secs(10), parse::go_duration)?,
            shutdown_delay: v.parse("SHUTDOWN_DELAY", Duration::ZERO, parse::go_duration)?,
            obs: observability::from_vars(v)?,
            config_type,
            xds,
            edges: edges::from_vars(v)?,
            policy: policy::from_vars(v)?,
            insight: insight::from_vars(v)?,
            rlqs: rlqs::from_vars(v)?,
            region: region::from_vars(v)?,
            fleet: fleet::from_vars(v, backend)?,
        })
    }
}
/// `BACKEND_TYPE`; without it, a `REDIS_URL` picks Redis (the URL itself is read into `redis`),
/// else the memory store.
fn chosen_backend(v: &Vars) -> Result<Backend, SettingsError> {
    let redis_url = v.get("REDIS_URL").is_some();
    Ok(v.parse("BACKEND_TYPE", None, backend)?
        .unwrap_or(if redis_url {
            Backend::Redis
        } else {
            Backend::Memory
        }))
}

/// `CACHE_KEY_FORMAT`: by default Go's key layout on memcached, whose fleets share counters with
/// Go's, else ratelimitd's.
fn cache_key_format(v: &Vars, backend: Backend) -> Result<KeyFormat, SettingsError> {
    let default = match backend {
        Backend::Memcache => KeyFormat::Go,
        _ => KeyFormat::Safe,
    };
    v.parse("CACHE_KEY_FORMAT", default, key_format)
}

/// `CONFIG_POLL_INTERVAL` (2s by default); 0 polls never.
fn config_poll_interval(v: &Vars) -> Result<Option<Duration>, SettingsError> {
    let every = v.parse(
        "CONFIG_POLL_INTERVAL",
        Duration::from_secs(2),
        parse::go_duration,
    )?;
    Ok(Some(every).filter(|d| !d.is_zero()))
}

#[cfg(test)]
mod tests;
