//! Small value types of the settings: log level and format, backend, cache key format, StatsD
//! protocol, and a redacting secret. They live here, at the bottom, so the modules that act on
//! them (`limiter`, `metrics`) import them from settings and settings imports nothing above it.

use std::fmt;

/// `LOG_LEVEL` (logrus names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum LogLevel {
    Panic,
    Fatal,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// `LOG_FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where counters live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded in-process store.
    Memory,
    /// Redis.
    Redis,
    /// Memcached (`MEMCACHE_*`): fixed windows only, Go's keys.
    Memcache,
}

/// `CACHE_KEY_FORMAT`: which cache key layout the limiter builds (see `limiter::key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyFormat {
    /// Injective, hash-tagged, algorithm-aware (the default).
    #[default]
    Safe,
    /// envoyproxy/ratelimit's exact fixed-window key (collides; see `limiter::key`).
    Go,
}

/// `STATSD_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsdProtocol {
    /// One TCP connection, re-dialled after a failure (the Go default).
    Tcp,
    /// Datagrams of whole lines.
    Udp,
}

/// A secret value (password, token): never printed by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "\"<redacted>\""
        })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
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

/// `BACKEND_TYPE`: empty (the default backend), `redis`, `memcache` or `memory`, any case.
pub(super) fn backend(s: &str) -> Result<Option<Backend>, String> {
    match s.to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "memory" => Ok(Some(Backend::Memory)),
        "redis" => Ok(Some(Backend::Redis)),
        "memcache" => Ok(Some(Backend::Memcache)),
        _ => Err("expected redis, memcache or memory".into()),
    }
}
