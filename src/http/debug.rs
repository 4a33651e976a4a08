//! The debug port: `/rlconfig` (the loaded limits, one per line, as the Go service prints them), a
//! list of endpoints on `/` and unknown paths, and — only when the service runs on the test-only
//! manual clock — `/test/clock` to read, set or advance it.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};

use crate::clock::{Clock, ManualClock, Timestamp};
use crate::reload::ConfigHandle;

/// State of the debug handlers.
#[derive(Debug, Clone)]
pub struct DebugState {
    /// The live configuration.
    pub config: Arc<ConfigHandle>,
    /// The manual clock, when the service runs on one (tests only).
    pub manual_clock: Option<Arc<ManualClock>>,
}

const ENDPOINTS: &[(&str, &str)] = &[(
    "/rlconfig",
    "print out the currently loaded configuration for debugging",
)];

/// The debug router.
pub fn router(state: DebugState) -> Router {
    let mut r = Router::new().route("/rlconfig", get(rlconfig));
    if state.manual_clock.is_some() {
        r = r.route("/test/clock", any(clock));
    }
    r.fallback(index).with_state(state)
}

async fn index() -> String {
    let mut out = String::new();
    for (path, help) in ENDPOINTS {
        let _ = writeln!(out, "{path}: {help}");
    }
    out
}

/// Renders the limits of the current configuration, one line each (nothing when none is loaded),
/// as the Go service does; then, as `# `-prefixed lines a Go-format parser can skip, the version,
/// when it was loaded, the load counters and — while the files on disk fail to load — every error.
pub fn render_rlconfig(config: &ConfigHandle) -> String {
    let mut out = String::new();
    let snapshot = config.snapshot();
    if let Some(s) = &snapshot {
        for l in s.config.limits() {
            let unit = l.unit.map_or("UNKNOWN", |u| u.as_str());
            let _ = writeln!(
                out,
                "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}",
                l.full_key, unit, l.requests_per_unit, l.shadow_mode, l.quota_mode
            );
        }
    }
    match &snapshot {
        Some(s) => {
            let _ = writeln!(out, "# version: {}", s.version);
            let _ = writeln!(out, "# loaded_at: {}", rfc3339(s.loaded_at));
        }
        None => out.push_str("# version: none (no configuration loaded)\n"),
    }
    let _ = writeln!(out, "# config_load_success: {}", config.load_successes());
    let _ = writeln!(out, "# config_load_error: {}", config.load_failures());
    if let Some(f) = config.last_failure() {
        let _ = writeln!(out, "# last_error_at: {}", rfc3339(f.at));
        for line in f.errors.lines() {
            let _ = writeln!(out, "# last_error: {line}");
        }
    }
    out
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC), via the days-to-civil algorithm (no date crate needed).
fn rfc3339(t: Timestamp) -> String {
    let secs = t.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        t.as_micros() % 1_000_000
    )
}

async fn rlconfig(State(s): State<DebugState>) -> String {
    render_rlconfig(&s.config)
}

/// `GET /test/clock` shows the time in microseconds; `?set=SECS` or `?advance_ms=MS` move it.
async fn clock(State(s): State<DebugState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let Some(c) = s.manual_clock else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if let Some(v) = q.get("set") {
        match v.parse::<u64>() {
            Ok(secs) => c.set(Timestamp::from_secs(secs)),
            Err(_) => {
                return (StatusCode::BAD_REQUEST, "set takes whole seconds\n").into_response();
            }
        }
    }
    if let Some(v) = q.get("advance_ms") {
        match v.parse::<u64>() {
            Ok(ms) => c.advance(Duration::from_millis(ms)),
            Err(_) => {
                return (StatusCode::BAD_REQUEST, "advance_ms takes milliseconds\n")
                    .into_response();
            }
        }
    }
    format!("{}\n", c.now().as_micros()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(
            rfc3339(Timestamp::from_secs(0)),
            "1970-01-01T00:00:00.000000Z"
        );
        let t = Timestamp::from_micros(1_795_290_293_500_000);
        assert_eq!(rfc3339(t), "2026-11-21T19:44:53.500000Z");
        assert_eq!(
            rfc3339(Timestamp::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000000Z"
        );
    }
}
