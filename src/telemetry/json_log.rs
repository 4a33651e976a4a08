//! The `LOG_FORMAT=json` line format of the Go service (logrus JSON formatter with its field
//! renames): `{"@timestamp": RFC 3339, "@message": ..., "level": "warning", <fields>...}`.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use ratelimitd_core::clock::{Clock, SystemClock};

/// The Go-shaped JSON event format.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct GoJson;

/// logrus level names.
fn level_name(l: Level) -> &'static str {
    match l {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// Collects an event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), Value::from(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), Value::from(value));
    }
}

impl<S, N> FormatEvent<S, N> for GoJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or(Value::from(""));
        let mut out = Map::new();
        out.insert(
            "@timestamp".into(),
            Value::from(SystemClock.now().to_rfc3339()),
        );
        out.insert("@message".into(), message);
        out.insert(
            "level".into(),
            Value::from(level_name(*event.metadata().level())),
        );
        for (k, v) in fields.0 {
            out.entry(k).or_insert(v);
        }
        writeln!(writer, "{}", Value::Object(out))
    }
}
