//! The debug port: `/rlconfig` (the loaded limits, one per line, as the Go service prints them,
//! then the stored overrides in service and this region's shares), a list of endpoints on `/` and unknown paths, and — only
//! when the service runs on the test-only manual clock — `/test/clock` to read, set or advance it.
//! The management API is not here: it has its own loopback listener ([`super::admin`]).
//!
//! The port keeps Go's `0.0.0.0` default and no authentication, so it shows no client data to an
//! anonymous caller: the limits of stored rules and the stored overrides (descriptor values, the
//! creating token's name) are listed only with a valid admin bearer token, else counted. Every
//! value printed has its control characters escaped, so a newline in a value cannot forge a line.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};

use crate::policy::rules::FILE_PREFIX;
use crate::policy::{Overrides, Tokens};
use crate::reload::ConfigHandle;
use ratelimitd_core::algorithm::Algorithm;
use ratelimitd_core::clock::{Clock, ManualClock, Timestamp};
use ratelimitd_core::config::Limit;

/// State of the debug handlers.
#[derive(Debug, Clone)]
pub(crate) struct DebugState {
    /// The live configuration.
    pub config: Arc<ConfigHandle>,
    /// The manual clock, when the service runs on one (tests only).
    pub manual_clock: Option<Arc<ManualClock>>,
    /// The stored overrides in service (listed by `/rlconfig` to a token holder).
    pub overrides: Arc<Overrides>,
    /// The admin tokens that unlock the override lines of `/rlconfig`.
    pub tokens: Arc<Tokens>,
    /// This region's shares of regional limits and their sync (`# region...` lines).
    pub regions: crate::region::Regional,
}

/// Why a count replaces the lines of stored rules and overrides.
const HIDDEN: &str = " (client data: send the admin bearer token to list them)";

const ENDPOINTS: &[(&str, &str)] = &[(
    "/rlconfig",
    "print out the currently loaded configuration for debugging",
)];

/// The debug router.
pub(crate) fn router(state: DebugState) -> Router {
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
/// as the Go service does — the limits of stored rules (their paths carry client values) only
/// when `shown`, else counted in one line; then, as `# `-prefixed lines a Go-format parser can
/// skip, the version, when it was loaded, its hash (`sha256:` of the documents compiled), the
/// load counters and — while the files on disk fail to
/// load — every error (those in stored rules only when `shown`).
pub(crate) fn render_rlconfig(config: &ConfigHandle, shown: bool) -> String {
    let mut out = String::new();
    let snapshot = config.snapshot();
    if let Some(s) = &snapshot {
        let (listed, hidden): (Vec<_>, Vec<_>) = (s.config.limits().into_iter())
            .partition(|l| shown || !l.file.starts_with(FILE_PREFIX));
        for l in listed {
            let unit = l.unit.map_or("UNKNOWN", |u| u.as_str());
            if l.algorithm == Algorithm::Concurrency {
                concurrency_line(&mut out, l);
                continue;
            }
            // Go's fields first, so a Go-format parser still reads them; then ours, if set.
            let _ = writeln!(
                out,
                "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}{}",
                one_line(&l.full_key),
                unit,
                l.requests_per_unit,
                l.shadow_mode,
                l.quota_mode,
                extensions(l)
            );
        }
        if !hidden.is_empty() {
            let _ = writeln!(out, "# rules: {} limits hidden{HIDDEN}", hidden.len());
        }
        for d in s.config.domains() {
            if let Some(cap) = d.max_request_limit {
                let _ = writeln!(
                    out,
                    "# max_request_limit: {}: unit={} requests_per_unit={}",
                    one_line(&d.name),
                    cap.unit.as_str(),
                    cap.requests_per_unit
                );
            }
        }
    }
    match &snapshot {
        Some(s) => {
            let _ = writeln!(out, "# version: {}", s.version);
            let _ = writeln!(out, "# loaded_at: {}", s.loaded_at.to_rfc3339());
            if let Some(h) = config.current_hash() {
                let _ = writeln!(out, "# config_hash: {h}");
            }
        }
        None => out.push_str("# version: none (no configuration loaded)\n"),
    }
    let _ = writeln!(out, "# config_load_success: {}", config.load_successes());
    let _ = writeln!(out, "# config_load_error: {}", config.load_failures());
    if let Some(f) = config.last_failure() {
        let _ = writeln!(out, "# last_error_at: {}", f.at.to_rfc3339());
        // An error in a stored rule's document quotes its values, as the rule's limit would.
        let (listed, hidden): (Vec<_>, Vec<_>) =
            (f.errors.lines()).partition(|line| shown || !line.starts_with(FILE_PREFIX));
        for line in listed {
            let _ = writeln!(out, "# last_error: {}", one_line(line));
        }
        if !hidden.is_empty() {
            let _ = writeln!(
                out,
                "# last_error: {} in stored rules hidden{HIDDEN}",
                hidden.len()
            );
        }
    }
    out
}

/// What sets a limit apart from Go's plain fixed window, as `, name: value` fields after Go's:
/// its algorithm (and bucket capacity) when not `fixed_window`, its priority classes (share of the
/// limit each, the entry key that names them and the default class), its soft zone, its calendar.
fn extensions(l: &Limit) -> String {
    let mut out = String::new();
    if l.algorithm != Algorithm::FixedWindow {
        let _ = write!(out, ", algorithm: {}", l.algorithm.name());
        if let (true, Some(burst)) = (l.algorithm.has_burst(), l.burst) {
            let _ = write!(out, " burst={burst}");
        }
    }
    if let Some(shedding) = &l.shedding {
        if let Some(p) = &shedding.priorities {
            let classes: Vec<String> = (p.classes.iter())
                .map(|(name, share)| format!("{}={share}", one_line(name)))
                .collect();
            let _ = write!(
                out,
                ", priorities: {} (key {}, default {})",
                classes.join(" "),
                one_line(&p.key),
                one_line(p.name(p.default))
            );
        }
        if let Some(soft) = &shedding.soft {
            let _ = write!(out, ", soft: up_to={}", soft.up_to);
            if let Some(ratio) = soft.breach_ratio {
                let _ = write!(out, " breach_ratio={ratio}");
            }
        }
    }
    if let Some(zone) = l.calendar {
        let _ = write!(out, ", calendar: {}", zone.name());
    }
    out
}

/// The line of a concurrency limit: its slots and lease timeout instead of Go's
/// `unit=… requests_per_unit=…`, which would read as a rate it does not have.
fn concurrency_line(out: &mut String, l: &Limit) {
    let timeout = l
        .window()
        .map_or(0, ratelimitd_core::algorithm::Window::secs);
    let _ = writeln!(
        out,
        "{}: algorithm=concurrency slots={} lease_timeout={}s, shadow_mode: {}, quota_mode: {}",
        one_line(&l.full_key),
        l.requests_per_unit,
        timeout,
        l.shadow_mode,
        l.quota_mode
    );
}

async fn rlconfig(State(s): State<DebugState>, headers: HeaderMap) -> String {
    let shown = super::admin::auth::holder(&s.tokens, &headers).is_some();
    let mut out = render_rlconfig(&s.config, shown);
    render_overrides(&s.overrides, shown, &mut out);
    let snapshot = s.config.snapshot();
    for line in s.regions.describe(snapshot.as_ref().map(|s| &s.config)) {
        let _ = writeln!(out, "# {}", one_line(&line));
    }
    out
}

/// Appends one `# override:` line per stored override in service when `shown` (the caller holds
/// an admin token);
/// otherwise one line saying how many there are. Client data (domain, descriptor, the token's
/// name) is printed as JSON strings, so quotes, spaces and control characters stay inside them.
pub(crate) fn render_overrides(overrides: &Overrides, shown: bool, out: &mut String) {
    let index = overrides.load();
    let all = index.all();
    if !shown {
        if !all.is_empty() {
            let _ = writeln!(out, "# overrides: {} hidden{HIDDEN}", all.len());
        }
        return;
    }
    for o in all {
        let _ = writeln!(
            out,
            "# override: {} domain={} descriptor={} unit={} requests_per_unit={} valid_until={} by={}",
            one_line(&o.id),
            quoted(&o.spec.domain),
            serde_json::to_string(&o.spec.descriptor).unwrap_or_default(),
            o.spec.unit.as_str(),
            o.spec.requests_per_unit,
            o.spec.valid_until.to_rfc3339(),
            quoted(&o.created_by),
        );
    }
}

/// `s` as a JSON string: quoted, with quotes, backslashes and control characters escaped.
fn quoted(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// `s` with its control characters (line breaks first of all) escaped as `\u{..}`; text without
/// any is returned as it is, so Go's lines print unchanged.
pub(crate) fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
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
    fn errors_in_stored_rules_are_hidden_and_control_characters_escaped() {
        let config = ConfigHandle::new();
        let errors = "config.a.yaml: domain: bad\rline\npolicy-db/t: descriptors[0]: 'vip-7'";
        config.record_failure(errors.to_string(), Timestamp::from_secs(1));
        let anonymous = render_rlconfig(&config, false);
        assert!(
            anonymous.contains("# last_error: config.a.yaml: domain: bad\\u{d}line\n"),
            "{anonymous}"
        );
        assert!(!anonymous.contains("vip-7"), "{anonymous}");
        assert!(anonymous.contains("# last_error: 1 in stored rules hidden"));
        let shown = render_rlconfig(&config, true);
        assert!(shown.contains("# last_error: policy-db/t: descriptors[0]: 'vip-7'\n"));
    }
}
