//! The operator's status page, `GET /` on the admin router: one server-rendered HTML page (no
//! script, refreshed by `<meta http-equiv=refresh>` every 10 s) answering "what is in force and
//! who is being limited": loaded domains and limits, active overrides with their time left, the
//! hottest keys, recent violations, each Redis breaker's state, and the configuration's load
//! status. Every value is HTML-escaped (`render`): descriptor values are client data.
//!
//! Access: the bearer token, as `/v1`; with `ADMIN_TRUST_LOOPBACK=true` a loopback peer reads it
//! without one ([`super::auth::Viewer`]). The `Host` check of [`super::access`] comes first.

mod html;
mod render;

use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::auth::Viewer;
use super::{AdminState, error};
pub use html::escape;

/// How many hot keys and violations the page lists.
const ROWS: usize = 10;

/// How long the page waits for the violation log's query.
const VIOLATIONS_TIMEOUT: Duration = Duration::from_secs(2);

/// What the violation section shows.
#[derive(Debug)]
enum Violations {
    /// No violation log is wired in on this instance.
    NotWired,
    /// Its newest records.
    Rows(Vec<crate::insight::ViolationView>),
    /// Its query failed or timed out.
    Failed(String),
}

/// Renders the page (the [`Viewer`] extractor has checked the token or the trusted peer).
pub async fn page(_: Viewer, State(s): State<AdminState>) -> Response {
    let Some(insight) = &s.insight else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the status page is not wired",
        );
    };
    let violations = match &insight.violations {
        None => Violations::NotWired,
        Some(v) => match tokio::time::timeout(VIOLATIONS_TIMEOUT, v.recent(ROWS)).await {
            Ok(Ok(rows)) => Violations::Rows(rows),
            Ok(Err(e)) => Violations::Failed(e),
            Err(_) => Violations::Failed("the violation log did not answer in time".into()),
        },
    };
    let html = render::page(insight, &violations, s.policy.is_ok());
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // No script may run even if a value escaped escaping: the page has none of its own.
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'",
        ),
    ];
    (StatusCode::OK, headers, html).into_response()
}
