//! Small value types of the settings: log level and format, backend, StatsD protocol, and a
//! redacting secret. The cache key format is the core limiter's own type ([`KeyFormat`]),
//! re-exported here where the settings name it.

use std::fmt;

pub use crate::limiter::KeyFormat;

/// `LOG_LEVEL` (logrus names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// `panic`: errors only, as `error` (no level is above it here).
    Panic,
    /// `fatal`: errors only, as `error`.
    Fatal,
    /// `error`.
    Error,
    /// `warn`.
    Warn,
    /// `info`.
    Info,
    /// `debug`.
    Debug,
    /// `trace`.
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
