//! The debug port: `/rlconfig` (the loaded limits, one per line, as the Go service prints them,
//! then the stored overrides in service), a list of endpoints on `/` and unknown paths, and — only
//! when the service runs on the test-only manual clock — `/test/clock` to read, set or advance it.
//! The management API is not here: it has its own loopback listener ([`super::admin`]).

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
use crate::policy::Overrides;
use crate::reload::ConfigHandle;

/// State of the debug handlers.
#[derive(Debug, Clone)]
pub struct DebugState {
    /// The live configuration.
    pub config: Arc<ConfigHandle>,
    /// The manual clock, when the service runs on one (tests only).
    pub manual_clock: Option<Arc<ManualClock>>,
    /// The stored overrides in service (listed by `/rlconfig`).
    pub overrides: Arc<Overrides>,
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
            let _ = writeln!(out, "# loaded_at: {}", s.loaded_at.to_rfc3339());
        }
        None => out.push_str("# version: none (no configuration loaded)\n"),
    }
    let _ = writeln!(out, "# config_load_success: {}", config.load_successes());
    let _ = writeln!(out, "# config_load_error: {}", config.load_failures());
    if let Some(f) = config.last_failure() {
        let _ = writeln!(out, "# last_error_at: {}", f.at.to_rfc3339());
        for line in f.errors.lines() {
            let _ = writeln!(out, "# last_error: {line}");
        }
    }
    out
}

async fn rlconfig(State(s): State<DebugState>) -> String {
    let mut out = render_rlconfig(&s.config);
    render_overrides(&s.overrides, &mut out);
    out
}

/// Appends one `# override:` line per stored override in service (expired ones still in the
/// index until its next refresh are marked so).
pub fn render_overrides(overrides: &Overrides, out: &mut String) {
    let index = overrides.load();
    for o in index.all() {
        let path: Vec<String> = o
            .spec
            .descriptor
            .iter()
            .map(|e| format!("{}={}", e.key, e.value))
            .collect();
        let _ = writeln!(
            out,
            "# override: {} domain={} descriptor={} unit={} requests_per_unit={} valid_until={} by={}",
            o.id,
            o.spec.domain,
            path.join(","),
            o.spec.unit.as_str(),
            o.spec.requests_per_unit,
            o.spec.valid_until.to_rfc3339(),
            o.created_by,
        );
    }
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
