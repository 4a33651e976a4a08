//! The admin surface on its own listener, `ADMIN_HOST:ADMIN_PORT` (loopback by default, unlike the
//! Go-compatible debug port): `/v1/overrides`, `/v1/policies`, `/v1/violations`, the read-only
//! `/v1/hotkeys` and `/v1/explain` and `/v1/counters/reset` ([`counters`]) (no database needed),
//! JSON in and out, and the operator
//! console on `/` ([`console`]). Every request first passes [`access`] (the `Host` allow-list);
//! then [`auth`] decides from the request head, before any body is read: every `/v1` request needs
//! a configured bearer token (none configured: 403 — the API is never open), the console a token,
//! a session cookie from its login form ([`login`], [`session`]) or a trusted loopback peer
//! (`ADMIN_TRUST_LOOPBACK`). The policy database being off or
//! down answers 503; invalid input answers 422 with every field error (an explain body that cannot
//! be read, 400).

pub(crate) mod access;
pub(crate) mod auth;
pub(crate) mod change;
pub(crate) mod console;
pub(crate) mod counters;
pub(crate) mod explain;
pub(crate) mod history;
pub(crate) mod hotkeys;
pub(crate) mod login;
mod options;
pub(crate) mod overrides;
pub(crate) mod policies;
pub(crate) mod session;
pub(crate) mod violations;

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::policy::{FieldError, Policy, Tokens};
use crate::reload::Reloading;

pub(crate) use options::{AdminSettings, AllowedHosts, DEFAULT_ALLOWED_HOSTS};

/// State of the admin handlers.
#[derive(Debug, Clone)]
pub(crate) struct AdminState {
    /// The open policy database, or why the policy API is off.
    pub policy: Result<Arc<Policy>, Arc<str>>,
    /// The accepted bearer tokens.
    pub tokens: Arc<Tokens>,
    /// The configuration pipeline rules are compiled into.
    pub reloading: Reloading,
    /// Hot keys and the console's views; `None` until the service hands them in.
    pub insight: Option<crate::insight::Insight>,
    /// Explain (`/v1/explain`, the console's key search); `None` until the service hands it in.
    pub explainer: Option<crate::explain::Explainer>,
    /// This region's shares of regional limits and their sync, for the console.
    pub regions: Option<crate::region::Regional>,
    /// The console's sign-in sessions.
    pub sessions: Arc<session::Sessions>,
}

/// The endpoints of the admin listener, as the console lists them.
pub(crate) const ENDPOINTS: &[(&str, &str)] = &[
    (
        "/",
        "console: health, decision rates, limits nearest their thresholds, key search, overrides, hot keys, violations, breakers, region shares (bearer token or a signed-in session; none from loopback with ADMIN_TRUST_LOOPBACK)",
    ),
    (
        "/login",
        "POST token=…: the console's sign-in form; a known token sets an HttpOnly, SameSite=Strict session cookie (8 h)",
    ),
    ("/logout", "POST: ends the console session"),
    (
        "/v1/policies",
        "rules; /v1/policies/{id}/history, POST /v1/policies/{id}/rollback; ?dry_run=true on changes (bearer token; changes: role admin)",
    ),
    (
        "/v1/config/history",
        "the configuration's last loads: time, version or errors, sha256 hash, file names (bearer token)",
    ),
    (
        "/v1/history",
        "every change of a rule or override and other recorded events, newest first, ?kind=&target=&limit=&cursor= (bearer token)",
    ),
    (
        "/openapi.json",
        "the OpenAPI description of these endpoints",
    ),
    (
        "/v1/overrides",
        "stored overrides with expiry (bearer token)",
    ),
    (
        "/v1/violations",
        "over-limit decisions, newest first, ?domain=&client_key=&since=&until=&limit= (bearer token)",
    ),
    (
        "/v1/hotkeys",
        "hottest keys of the last minute, ?by=hits|denials&limit=N (bearer token)",
    ),
    (
        "/v1/counters/reset",
        "POST {domain, descriptor} or {domain, prefix, max_keys}: forget what a client has used (bearer token)",
    ),
    (
        "/v1/explain",
        "POST {domain, descriptors}: the limits, overrides, live counters and recent violations of each descriptor, counting no hit (bearer token)",
    ),
];

/// The admin routes, served on the admin listener (bound to `host`, `ADMIN_HOST`) behind the
/// `Host` check of `access` (whose settings are logged here, once).
pub(crate) fn router(state: AdminState, access: &AdminSettings, host: &str) -> Router {
    access::log_in_force(access, &state.tokens, host);
    let guard = axum::middleware::from_fn_with_state(Arc::new(access.clone()), access::guard);
    Router::new()
        .route("/", get(console::page))
        .route("/login", post(login::login))
        .route("/logout", post(login::logout))
        .route("/openapi.json", get(super::openapi::handler))
        .route("/v1/hotkeys", get(hotkeys::list))
        .route("/v1/explain", post(explain::explain))
        .route("/v1/counters/reset", post(counters::reset))
        .route(
            "/v1/overrides",
            get(overrides::list).post(overrides::create),
        )
        .route(
            "/v1/overrides/{id}",
            get(overrides::get).delete(overrides::remove),
        )
        .route("/v1/policies", get(policies::list))
        .route("/v1/policies/{id}/history", get(policies::history))
        .route("/v1/policies/{id}/rollback", post(policies::rollback))
        .route("/v1/overrides/{id}/history", get(overrides::history))
        .route("/v1/history", get(history::list))
        .route("/v1/config/history", get(history::config_loads))
        .route("/v1/violations", get(violations::list))
        .route(
            "/v1/policies/{id}",
            get(policies::get)
                .put(policies::put)
                .delete(policies::remove),
        )
        .with_state(state)
        .layer(guard)
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, body: &serde_json::Value) -> Response {
    let headers = [(header::CONTENT_TYPE, "application/json")];
    (status, headers, format!("{body}\n")).into_response()
}

/// `{"error": …}` with `status`.
pub(crate) fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    json(status, &serde_json::json!({ "error": message.to_string() }))
}

/// 503: the database failed (logged).
pub(crate) fn unavailable(e: impl std::fmt::Display) -> Response {
    tracing::warn!(error = %e, "policy API: database unavailable");
    error(StatusCode::SERVICE_UNAVAILABLE, e)
}

/// 404: no `what` (a policy, an override) has this `id`.
pub(crate) fn not_found(what: &str, id: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("no {what} '{id}'"))
}

/// The answer of a `GET` on a collection: `{"<field>": [...]}` (200) with the stored items `keep`
/// lets through, each as `render` shows it; 503 when reading them failed.
pub(crate) fn listed<T, E: std::fmt::Display>(
    read: Result<Vec<T>, E>,
    field: &str,
    keep: impl Fn(&T) -> bool,
    render: impl Fn(&T) -> serde_json::Value,
) -> Response {
    match read {
        Ok(all) => {
            let items: Vec<_> = all.iter().filter(|t| keep(t)).map(render).collect();
            json(StatusCode::OK, &serde_json::json!({ field: items }))
        }
        Err(e) => unavailable(e),
    }
}

/// The answer of a `GET` on one item: the stored `what` whose id `has_id` recognises (200, as
/// `render` shows it), 404 when there is none, 503 when reading them failed.
pub(crate) fn one<T, E: std::fmt::Display>(
    read: Result<Vec<T>, E>,
    (what, id): (&str, &str),
    has_id: impl Fn(&T, &str) -> bool,
    render: impl Fn(&T) -> serde_json::Value,
) -> Response {
    match read {
        Ok(all) => match all.iter().find(|t| has_id(t, id)) {
            Some(t) => json(StatusCode::OK, &render(t)),
            None => not_found(what, id),
        },
        Err(e) => unavailable(e),
    }
}

/// 422 with every field error.
pub(crate) fn invalid(errors: &[FieldError]) -> Response {
    json(
        StatusCode::UNPROCESSABLE_ENTITY,
        &serde_json::json!({ "errors": errors }),
    )
}
