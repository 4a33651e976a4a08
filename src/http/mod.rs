//! The HTTP edges: the main port (`/json`, `/healthcheck`, as the Go service, ratelimitd's
//! `POST /check`, the `/livez` and `/readyz` probes and the [`openapi`] description) and the debug port (`/rlconfig`, the endpoint
//! list, and the test-only clock control). Bodies are read under a byte cap and the listener's
//! body timeout ([`body`]), and decoded under the request caps (`capped`).

pub(crate) mod admin;
pub(crate) mod body;
mod capped;
pub(crate) mod check;
pub(crate) mod debug;
mod health;
pub(crate) mod json;
pub(crate) mod openapi;
mod options;
pub(crate) mod rate_text;
mod strict;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};

use crate::health::Health;
use crate::metrics::Metrics;
use crate::service::Service;
use check::metrics::{CheckMetrics, record};
use ratelimitd_core::limiter::headers::RateLimitHeaders;
use ratelimitd_core::limiter::{Code, Limits};

pub(crate) use options::EdgeSettings;

/// State shared by the main-port handlers.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// The rate limit service.
    pub service: Arc<Service>,
    /// Health components.
    pub health: Arc<Health>,
    /// `/check` and `/json` settings.
    pub edges: Arc<EdgeSettings>,
    /// The stats `/check`'s request counter and response time register with (`None`: stats
    /// are off).
    pub metrics: Option<Arc<Metrics>>,
    /// The request caps bodies are decoded under.
    pub caps: Limits,
}

/// The main HTTP router; `/check`'s metrics are registered with the stats here.
pub fn router(state: HttpState) -> Router {
    let check_metrics = state.metrics.as_ref().map(|m| {
        let counters = Arc::new(CheckMetrics::default());
        m.register(counters.clone());
        counters
    });
    Router::new()
        .route("/json", any(json_handler))
        .route("/healthcheck", any(health::healthcheck))
        .route("/livez", get(health::livez))
        .route("/readyz", get(health::readyz))
        .route("/openapi.json", get(openapi::handler))
        .route(
            "/check",
            post(check::handler).route_layer(from_fn_with_state(check_metrics, record)),
        )
        .fallback(not_found)
        .with_state(state)
}

/// A plain-text response as Go's `http.Error` writes it.
pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body.into(),
    )
        .into_response()
}

async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "404 page not found\n")
}

async fn json_handler(
    axum::extract::State(s): axum::extract::State<HttpState>,
    body: Body,
) -> Response {
    let max = s.edges.json_max_body_bytes;
    let bytes = match body::read(body, max, "JSON_MAX_BODY_BYTES").await {
        Ok(bytes) => bytes,
        Err(e @ body::BodyError::TooLarge { .. }) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Payload Too Large: {e}\n"),
            );
        }
        Err(e @ body::BodyError::TimedOut(_)) => {
            return text(
                StatusCode::REQUEST_TIMEOUT,
                format!("Request Timeout: {e}\n"),
            );
        }
        Err(_) => return text(StatusCode::BAD_REQUEST, "Bad Request\n"),
    };
    let caps = s.caps;
    let parsed = crate::listener::offload(bytes, move |b| json::parse_request(b, &caps)).await;
    let req = match parsed {
        Some(Ok(req)) => req,
        // A cap of ours says which one (Go has none, so no Go client reads this body).
        Some(Err(e @ json::JsonError::OverCap(_))) => {
            return text(StatusCode::BAD_REQUEST, format!("Bad Request: {e}\n"));
        }
        Some(Err(_)) => return text(StatusCode::BAD_REQUEST, "Bad Request\n"),
        None => return text(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable\n"),
    };
    if let Some(why) = strict::refusal(&s, &req.domain) {
        return text(StatusCode::BAD_REQUEST, format!("Bad Request: {why}\n"));
    }
    match s.service.should_rate_limit(&req).await {
        Ok(resp) => {
            let status = match resp.overall_code {
                Code::Ok => StatusCode::OK,
                Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
            };
            let body = json::render_response(&resp).to_string();
            let mut r =
                (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
            // A real 429 carries the standard headers, as `/check` does; a 200 stays Go's.
            if status == StatusCode::TOO_MANY_REQUESTS {
                check::add_headers(&mut r, &RateLimitHeaders::from_response(&resp).pairs());
            } else if resp.soft_breach {
                // The one header a 200 adds: the warning comes before anything is denied.
                let pair = [(
                    ratelimitd_core::limiter::SOFT_BREACH_HEADER,
                    "true".to_string(),
                )];
                check::add_headers(&mut r, &pair);
            }
            r
        }
        // A cap of ours says which one (Go has none, so no Go client reads this body).
        Err(e) if e.is_over_cap() => text(StatusCode::BAD_REQUEST, format!("Bad Request: {e}\n")),
        // Go answers every service error on /json with 400, store failures included.
        Err(_) => text(StatusCode::BAD_REQUEST, "Bad Request\n"),
    }
}
