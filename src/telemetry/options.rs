//! What logging and tracing are told at startup: the level and format of log lines and where
//! spans go. Read from `LOG_LEVEL`, `LOG_FORMAT`, `TRACING_*` and `OTEL_EXPORTER_OTLP_*` by the
//! settings.

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

/// `TRACING_EXPORTER_PROTOCOL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracingProtocol {
    /// OTLP/HTTP with protobuf bodies.
    Http,
    /// OTLP/gRPC.
    Grpc,
}

/// Tracing settings. Field docs name the variables (grouped ones share a doc).
#[derive(Debug, Clone)]
pub struct TracingSettings {
    /// `TRACING_ENABLED`.
    pub enabled: bool,
    /// `TRACING_EXPORTER_PROTOCOL`.
    pub protocol: TracingProtocol,
    /// `TRACING_SERVICE_NAME`.
    pub service_name: String,
    /// `TRACING_SERVICE_NAMESPACE`.
    pub service_namespace: String,
    /// `TRACING_SERVICE_INSTANCE_ID` (empty: a random id at startup).
    pub service_instance_id: String,
    /// `TRACING_SAMPLING_RATE`: ParentBased(TraceIdRatio).
    pub sampling_rate: f64,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (base URL;
    /// `/v1/traces` is appended for HTTP). Other `OTEL_EXPORTER_OTLP_*` variables are read by the
    /// exporter itself.
    pub traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (see `traces_endpoint`).
    pub endpoint: Option<String>,
}

/// Everything [`super::init`] needs.
#[derive(Debug, Clone)]
pub struct TelemetryOptions {
    /// `LOG_LEVEL`.
    pub log_level: LogLevel,
    /// `LOG_FORMAT`.
    pub log_format: LogFormat,
    /// `TRACING_*` and the OTLP endpoint.
    pub tracing: TracingSettings,
}
