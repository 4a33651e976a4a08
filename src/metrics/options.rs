//! What the stats sinks are told at startup: which sink runs, where StatsD and Prometheus are,
//! the extra tags, the flush interval and the stat-key bound. Read from `USE_STATSD`,
//! `USE_PROMETHEUS`, `DISABLE_STATS`, `STATSD_*`, `PROMETHEUS_*`, `EXTRA_TAGS` and
//! `STATS_*` by the settings.

use std::time::Duration;

use super::mogrifier::Mogrifier;
use crate::telemetry::TracingSettings;

/// `STATSD_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsdProtocol {
    /// One TCP connection, re-dialled after a failure (the Go default).
    Tcp,
    /// Datagrams of whole lines.
    Udp,
}

/// Which stats sink runs (precedence `DISABLE_STATS` > `USE_DOG_STATSD` > `USE_STATSD` > `USE_PROMETHEUS`,
/// `docs/design/contract.md#stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsSinkKind {
    /// `DISABLE_STATS=true`: nothing is counted.
    Disabled,
    /// StatsD (the Go default), or DogStatsD with `USE_DOG_STATSD` (see `Observability::dogstatsd`).
    Statsd,
    /// Prometheus on its own listener.
    Prometheus,
}

/// Stats and tracing settings.
#[derive(Debug, Clone)]
pub struct Observability {
    /// The sink chosen by the precedence rules.
    pub sink: StatsSinkKind,
    /// `USE_DOG_STATSD`: the StatsD sink sends DogStatsD tags (`|#k:v`) instead of tags in names.
    pub dogstatsd: bool,
    /// `STATSD_HOST`.
    pub statsd_host: String,
    /// `STATSD_PORT`.
    pub statsd_port: u16,
    /// `STATSD_PROTOCOL`; always UDP with `USE_DOG_STATSD`, as Go's DogStatsD sink sends.
    pub statsd_protocol: StatsdProtocol,
    /// `USE_DOG_STATSD_MOGRIFIERS` and each one's `DOG_STATSD_MOGRIFIER_<NAME>_*`, in order.
    pub mogrifiers: Vec<Mogrifier>,
    /// `PROMETHEUS_ADDR` (`:9090` means every interface).
    pub prometheus_addr: String,
    /// `PROMETHEUS_PATH`.
    pub prometheus_path: String,
    /// `PROMETHEUS_MAPPER_YAML`: accepted (Envoy Gateway sets it to the `statsd_exporter` mapping it
    /// ships) but not read — the exported names are those of Go's default mapping, built in — and
    /// said at startup, at the default level, when the Prometheus sink serves.
    pub prometheus_mapper_yaml: Option<String>,
    /// `EXTRA_TAGS` (`k:v,...`), sorted by key.
    pub extra_tags: Vec<(String, String)>,
    /// `STATS_FLUSH_INTERVAL`.
    pub stats_flush_interval: Duration,
    /// `STATS_MAX_KEYS`: distinct stat keys kept per table before folding into the overflow key.
    pub stats_max_keys: usize,
    /// `TRACING_*` and the OTLP endpoint.
    pub tracing: TracingSettings,
}
