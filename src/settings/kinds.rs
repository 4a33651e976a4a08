//! The parsers of the log level and format, the backend and the cache key format. The value types the components own are
//! re-exported here where the settings name them: the [`Backend`] (the store's), the cache key
//! format (the core limiter's [`KeyFormat`]), the log level and format (telemetry's), the StatsD
//! protocol (metrics') and the redacting [`Secret`].

pub(crate) use crate::metrics::StatsdProtocol;
pub(crate) use crate::secret::Secret;
pub(crate) use crate::store::Backend;
pub(crate) use crate::telemetry::{LogFormat, LogLevel};
pub(crate) use ratelimitd_core::limiter::KeyFormat;

/// `LOG_FORMAT`: `text` or `json`, any case.
pub(super) fn log_format(s: &str) -> Result<LogFormat, String> {
    match s.to_ascii_lowercase().as_str() {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected text or json".to_string()),
    }
}

/// `CACHE_KEY_FORMAT`: `ratelimitd` or `go`.
pub(super) fn key_format(s: &str) -> Result<KeyFormat, String> {
    match s {
        "ratelimitd" => Ok(KeyFormat::Safe),
        "go" => Ok(KeyFormat::Go),
        _ => Err("expected ratelimitd or go".to_string()),
    }
}

/// `LOG_LEVEL`: a logrus level name, any case.
pub(super) fn log_level(s: &str) -> Result<LogLevel, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "panic" => LogLevel::Panic,
        "fatal" => LogLevel::Fatal,
        "error" => LogLevel::Error,
        "warn" | "warning" => LogLevel::Warn,
        "info" => LogLevel::Info,
        "debug" => LogLevel::Debug,
        "trace" => LogLevel::Trace,
        _ => return Err("expected one of panic, fatal, error, warn, info, debug, trace".into()),
    })
}

/// `BACKEND_TYPE`: empty (the default backend), `redis`, `memcache`, `dynamodb` or `memory`, any
/// case; `dynamodb` only in a build with the `dynamodb` feature.
pub(super) fn backend(s: &str) -> Result<Option<Backend>, String> {
    match s.to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "memory" => Ok(Some(Backend::Memory)),
        "redis" => Ok(Some(Backend::Redis)),
        "memcache" => Ok(Some(Backend::Memcache)),
        "dynamodb" if cfg!(feature = "dynamodb") => Ok(Some(Backend::Dynamodb)),
        "dynamodb" => Err(
            "this build has no DynamoDB store; build with `--features dynamodb` \
                           (the project's image has it)"
                .into(),
        ),
        _ => Err("expected redis, memcache, dynamodb or memory".into()),
    }
}
