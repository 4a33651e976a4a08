//! The operator's console, `GET /` on the admin router: one server-rendered HTML page (no
//! script, refreshed by `<meta http-equiv=refresh>` every 10 s). At the top, who this instance is
//! and a health banner that turns red when anything is degraded (`banner`); then decisions per
//! second over 15 minutes as inline SVG (`charts`), a client-key search answered by explain
//! (`search`, `?domain=&descriptor=key=value,…`, counting no hit), the limits nearest their
//! thresholds (`nearest`), and the details (`sections`): configuration, limits, overrides,
//! hot keys, violations, breakers, region shares, and the usage of limits with priority classes against
//! each class's threshold (`shedding`). Every value is HTML-escaped ([`html::escape`]): descriptor
//! values are client data; the CSP forbids any script even if one slipped through.
//!
//! Access: the bearer token, as `/v1`, or the session cookie its login form sets
//! ([`super::login`]; the page then offers to sign out); with `ADMIN_TRUST_LOOPBACK=true` a
//! loopback peer reads it without either ([`super::auth::Viewer`]). The `Host` check of [`super::access`] comes first.

mod banner;
mod charts;
mod html;
mod nearest;
mod render;
mod search;
mod sections;
mod shedding;

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::auth::Viewer;
use super::{AdminState, error};
use crate::explain::client::parse_descriptor;
pub(crate) use html::escape;

/// Why the console has no decision counts: the counters exist only while a stats sink is chosen,
/// and none is with `DISABLE_STATS=true` or with `USE_STATSD=false` and no other sink.
const STATS_OFF: &str = "the counters are off (DISABLE_STATS=true, or USE_STATSD=false with \
                         neither USE_PROMETHEUS nor USE_DOG_STATSD)";

/// How many hot keys, violations and near-threshold limits the page lists.
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
pub(crate) async fn page(
    viewer: Viewer,
    State(s): State<AdminState>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let (Some(insight), Some(explainer)) = (&s.insight, &s.explainer) else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the console is not wired");
    };
    let violations = match &insight.violations {
        None => Violations::NotWired,
        Some(v) => match tokio::time::timeout(VIOLATIONS_TIMEOUT, v.recent(ROWS)).await {
            Ok(Ok(rows)) => Violations::Rows(rows),
            Ok(Err(e)) => Violations::Failed(e),
            Err(_) => Violations::Failed("the violation log did not answer in time".into()),
        },
    };
    let search = match (params.get("domain"), params.get("descriptor")) {
        (Some(domain), Some(text)) if !domain.is_empty() || !text.is_empty() => {
            let found = match parse_descriptor(text) {
                Ok(d) => (explainer.explain(domain, &[d]).await).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            Some((domain.clone(), text.clone(), found))
        }
        _ => None,
    };
    let series = insight.rates.as_ref().map(|r| r.series());
    let now = insight.clock.now();
    let store_healthy = explainer.store.is_healthy();
    let snapshot = insight.config.snapshot();
    let regions = (s.regions.as_ref())
        .map(|r| r.describe(snapshot.as_ref().map(|s| &s.config)))
        .unwrap_or_default();
    let view = render::View {
        insight,
        regions,
        violations,
        policy_on: s.policy.is_ok(),
        signed_in: viewer.signed_in,
        banner: banner::lines(insight, store_healthy, series.as_deref(), now),
        near: nearest::find(insight, explainer, ROWS).await,
        series,
        search,
    };
    let html = render::page(&view);
    // No script may run even if a value escaped escaping: the page has none of its own.
    (StatusCode::OK, super::login::html_headers(), html).into_response()
}
