//! Logs and traces. Logs: `LOG_LEVEL`, `LOG_FORMAT` (`json` writes the Go service's logrus shape:
//! `@timestamp` RFC 3339, `@message`, `level`, then the event's fields; `text` escapes control
//! characters in every field, [`text_log`], so client input cannot forge a line). Traces: with
//! `TRACING_ENABLED`, spans go to an OTLP collector (HTTP or gRPC) through a batch exporter that
//! runs off the request path; the parent comes from what the caller sent, as in the Go service:
//! W3C `traceparent`, B3 (`b3` or `x-b3-*`, [`b3`]; it wins when both are sent) and `baggage`.
//!
//! Nothing is logged per request at info or below warn, so the default level never costs a line
//! per decision — except the sampled decision log (`DECISION_LOG_SAMPLE_RATE`, off by default),
//! whose lines pass at any level.

pub(crate) mod b3;
pub(crate) mod json_log;
mod options;
pub(crate) mod text_log;

use std::io::IsTerminal;

use opentelemetry::propagation::Extractor;
use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{KeyValue, global};
use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

pub use options::TelemetryOptions;
pub(crate) use options::{LogFormat, LogLevel, TracingProtocol, TracingSettings};

/// Tracing could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the OTLP trace exporter: {0}")]
pub struct TelemetryError(String);

/// Keeps the trace pipeline alive; flush or shut it down before exit so buffered spans are sent.
#[derive(Debug, Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends every finished span now (blocks; call from a blocking context).
    pub fn flush(&self) {
        if let Some(p) = &self.provider
            && let Err(e) = p.force_flush()
        {
            tracing::warn!(error = %e, "trace flush failed");
        }
    }

    /// Flushes and stops the exporter.
    pub fn shutdown(self) {
        if let Some(p) = self.provider
            && let Err(e) = p.shutdown()
        {
            tracing::warn!(error = %e, "trace exporter shutdown failed");
        }
    }
}

/// The tracing target of the sampled decision log (`crate::insight::decision_log` writes it).
pub(crate) const DECISION_LOG_TARGET: &str = "ratelimitd::decision";

/// `LOG_LEVEL` for every target, except the sampled decision log, which is written at info
/// whatever the level (its volume is `DECISION_LOG_SAMPLE_RATE`'s to decide).
fn filter(level: LogLevel) -> Targets {
    let level = level_filter(level);
    Targets::new()
        .with_default(level)
        .with_target(DECISION_LOG_TARGET, level.max(LevelFilter::INFO))
}

fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Trace => LevelFilter::TRACE,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Warn => LevelFilter::WARN,
        _ => LevelFilter::ERROR,
    }
}

/// Installs the global log subscriber (stderr) and, when enabled, the OTLP trace pipeline.
/// Call once, from `main` (or once per test process).
pub fn init(options: &TelemetryOptions) -> Result<Telemetry, TelemetryError> {
    // Colours only for a terminal: a file or a log collector gets plain text, where the only
    // escape sequences could be a client's (and those are escaped, see `text_log`).
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let fmt = match options.log_format {
        LogFormat::Json => fmt.event_format(json_log::GoJson).boxed(),
        LogFormat::Text => fmt.fmt_fields(text_log::EscapedFields::new()).boxed(),
    };
    let fmt = fmt.with_filter(filter(options.log_level));
    let t = &options.tracing;
    if !t.enabled {
        let _ = tracing_subscriber::registry().with(fmt).try_init();
        return Ok(Telemetry::default());
    }
    let provider = provider(t)?;
    global::set_text_map_propagator(propagator());
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("ratelimitd"))
        .with_filter(LevelFilter::INFO);
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();
    Ok(Telemetry {
        provider: Some(provider),
    })
}

fn provider(t: &TracingSettings) -> Result<SdkTracerProvider, TelemetryError> {
    let err = |e: opentelemetry_otlp::ExporterBuildError| TelemetryError(e.to_string());
    let exporter = match t.protocol {
        TracingProtocol::Http => {
            let mut b = SpanExporter::builder().with_http();
            // Set programmatically, the endpoint is used as is: add the signal path to a base URL.
            let endpoint = t.traces_endpoint.clone().or_else(|| {
                t.endpoint
                    .as_ref()
                    .map(|e| format!("{}/v1/traces", e.trim_end_matches('/')))
            });
            if let Some(e) = endpoint {
                b = b.with_endpoint(e);
            }
            b.build().map_err(err)?
        }
        TracingProtocol::Grpc => {
            let mut b = SpanExporter::builder().with_tonic();
            if let Some(e) = t.traces_endpoint.clone().or_else(|| t.endpoint.clone()) {
                b = b.with_endpoint(e);
            }
            b.build().map_err(err)?
        }
    };
    let instance = if t.service_instance_id.is_empty() {
        random_instance_id()
    } else {
        t.service_instance_id.clone()
    };
    let mut attrs = vec![KeyValue::new("service.instance.id", instance)];
    if !t.service_namespace.is_empty() {
        attrs.push(KeyValue::new(
            "service.namespace",
            t.service_namespace.clone(),
        ));
    }
    let resource = Resource::builder()
        .with_service_name(t.service_name.clone())
        .with_attributes(attrs)
        .build();
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(t.sampling_rate)));
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler)
        .with_resource(resource)
        .build())
}

/// A random UUIDv4 (the Go default for `TRACING_SERVICE_INSTANCE_ID`), from the SDK's id source.
fn random_instance_id() -> String {
    use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
    let mut b = RandomIdGenerator::default().new_trace_id().to_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Reads W3C trace context from gRPC metadata.
struct Metadata<'a>(&'a tonic::metadata::MetadataMap);

impl Extractor for Metadata<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// The propagators the Go service reads, in its order (a later one wins): W3C trace context,
/// B3, baggage.
pub(crate) fn propagator() -> TextMapCompositePropagator {
    let all: Vec<Box<dyn TextMapPropagator + Send + Sync>> = vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(b3::B3Propagator),
        Box::new(BaggagePropagator::new()),
    ];
    TextMapCompositePropagator::new(all)
}

/// Makes `span` a child of the trace the caller propagated in `metadata` (`traceparent`, `b3`
/// or `x-b3-*`), if any.
pub(crate) fn set_remote_parent(span: &tracing::Span, metadata: &tonic::metadata::MetadataMap) {
    // A span no subscriber records (tracing off) has no parent to set: skip the header lookups.
    if span.is_disabled() {
        return;
    }
    let sent = ["traceparent", "b3", "x-b3-traceid"];
    if !sent.iter().any(|h| metadata.get(*h).is_some()) {
        return;
    }
    let cx = global::get_text_map_propagator(|p| p.extract(&Metadata(metadata)));
    let _ = span.set_parent(cx);
}
