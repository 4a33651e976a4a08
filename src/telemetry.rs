//! Logging setup from `LOG_LEVEL` and `LOG_FORMAT`.

use crate::settings::{LogFormat, LogLevel, Settings};

fn filter(level: LogLevel) -> tracing_subscriber::filter::LevelFilter {
    use tracing_subscriber::filter::LevelFilter;
    match level {
        LogLevel::Trace => LevelFilter::TRACE,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Warn => LevelFilter::WARN,
        _ => LevelFilter::ERROR,
    }
}

/// Installs the global log subscriber (stderr). Call once, from `main`.
pub fn init(settings: &Settings) {
    let builder = tracing_subscriber::fmt()
        .with_max_level(filter(settings.log_level))
        .with_writer(std::io::stderr);
    let _ = match settings.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
