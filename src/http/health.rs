//! The health endpoints of the main HTTP port. `/livez` answers as long as the process serves
//! requests and depends on nothing else (a Kubernetes liveness probe: a Redis outage must not
//! restart pods that answer by their failure mode). `/readyz` is readiness: 503 while a component
//! is down or the service is draining. `/healthcheck` is the Go service's endpoint with the same
//! meaning as `/readyz` (200 `OK`, else 500). Every unready body lists the components down.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::{HttpState, text};

/// `GET /livez`: 200 while the process serves.
pub(super) async fn livez() -> Response {
    text(StatusCode::OK, "alive\n")
}

/// `GET /readyz`: 200 `ready`, or 503 with one line per component down.
pub(super) async fn readyz(State(s): State<HttpState>) -> Response {
    answer(&s, "ready\n", StatusCode::SERVICE_UNAVAILABLE)
}

/// `/healthcheck` (Go's): 200 `OK`, or 500 with one line per component down.
pub(super) async fn healthcheck(State(s): State<HttpState>) -> Response {
    answer(&s, "OK", StatusCode::INTERNAL_SERVER_ERROR)
}

fn answer(s: &HttpState, ok: &'static str, down: StatusCode) -> Response {
    let why = s.health.not_ready();
    if why.is_empty() {
        return text(StatusCode::OK, ok);
    }
    let mut body = String::from("not ready:\n");
    for line in why {
        body.push_str("- ");
        body.push_str(&line);
        body.push('\n');
    }
    text(down, body)
}
