//! `POST /check` on the HTTP port: a rate limit decision for any service, not only Envoy. The body
//! is mapped onto the descriptor model ([`parse`]), decided by the same [`Service`] as gRPC and
//! `/json`, and answered with `200` (allowed) or `429` (denied), a small JSON body (the reported
//! limit's `limit` and `remaining`, `reset_at`, `retry_after`; a denial adds `"error": "Rate limit
//! exceeded"`) and the standard headers of [`RateLimitHeaders`]. With `max_wait_ms`, a leaky bucket limit shapes: a
//! request whose hits conform within that wait reserves its slot and is answered `200` with
//! `delay_ms` > 0, the time the caller waits before proceeding (rounded up to whole ms).
//!
//! With a concurrency limit, an acquisition holds its slot under `holder` (the caller's, or one
//! the answer names) until `"release": true` with the same `holder` gives it back
//! ([`holder`]); a refusal says `Retry-After: 1`, as a slot frees at an unpredictable release.
//!
//! Bad input, a body over `CHECK_MAX_BODY_BYTES` or a descriptor list over the request caps
//! included, is `400` with `{"error": ..., "message": ...}` naming the field (or the setting),
//! and nothing is counted; a body not received within `HTTP_BODY_TIMEOUT` is `408`. A request the
//! service cannot answer (store down with `failure_mode: error`, no configuration) is `503` with
//! `Retry-After: 1`.
//!
//! [`Service`]: crate::service::Service

pub(crate) mod holder;
pub(crate) mod metrics;
pub(crate) mod parse;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::HttpState;
use super::body::{self, BodyError};
use ratelimitd_core::limiter::headers::{AppliedLimit, RateLimitHeaders};
use ratelimitd_core::limiter::{Code, RequestError};

/// The `error` of a denial's body.
pub(crate) const DENIED: &str = "Rate limit exceeded";

/// The `POST /check` handler.
pub(crate) async fn handler(State(s): State<HttpState>, body: Body) -> Response {
    let req = match read(&s, body).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    if let Some(why) = super::strict::refusal(&s, &req.request.domain) {
        return error(StatusCode::BAD_REQUEST, "unknown_domain", &why);
    }
    let resp = match s.service.should_rate_limit(&req.request).await {
        Ok(resp) => resp,
        Err(e) => return refusal(&e),
    };
    let headers = RateLimitHeaders::from_response(&resp);
    let allowed = resp.overall_code == Code::Ok;
    let mut body = json!({
        "allowed": allowed,
        "limit": headers.reported().map(|l| l.quota),
        "remaining": headers.reported().map(|l| l.remaining),
        "reset_at": headers.reset_at,
        "retry_after": headers.retry_after.unwrap_or(0),
        "delay_ms": ceil_millis(headers.delay),
    });
    // Reported usage past the limit: `remaining` is unsigned and stays 0, so the debt is its own
    // number, present only while there is one.
    if let Some(debt) = headers.reported().map(|l| l.debt).filter(|d| *d > 0) {
        body["debt"] = Value::from(debt);
    }
    // A denial's body can be forwarded to the caller's own client as it is.
    if !allowed {
        body["error"] = Value::from(DENIED);
    }
    // The holder is news only to a caller whose request a concurrency limit saw.
    if resp.holds_slots || req.holder.sent {
        body["holder"] = Value::from(req.holder.id);
    }
    if req.details {
        body["limits"] = headers.limits.iter().map(limit_details).collect::<Value>();
    }
    let status = if allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut r = json_answer(status, &body);
    add_headers(&mut r, &headers.pairs());
    r
}

/// Reads and parses the body (off the async workers); the error answer when it cannot.
async fn read(s: &HttpState, body: Body) -> Result<parse::CheckRequest, Response> {
    let max = s.edges.check_max_body_bytes;
    let bytes = match body::read(body, max, "CHECK_MAX_BODY_BYTES").await {
        Ok(bytes) => bytes,
        Err(e) => {
            let (status, code) = match e {
                BodyError::TooLarge { .. } => (StatusCode::BAD_REQUEST, "body_too_large"),
                BodyError::TimedOut(_) => (StatusCode::REQUEST_TIMEOUT, "body_timeout"),
                BodyError::Read(_) => (StatusCode::BAD_REQUEST, "body_unreadable"),
            };
            return Err(error(status, code, &e.to_string()));
        }
    };
    let (edges, caps) = (s.edges.clone(), s.caps);
    let parsed =
        crate::listener::offload(bytes, move |b| parse::parse(b, &edges.check_domain, &caps)).await;
    match parsed {
        Some(Ok(req)) => Ok(req),
        Some(Err(e)) => Err(error(StatusCode::BAD_REQUEST, e.code(), &e.to_string())),
        None => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "shutting down",
        )),
    }
}

/// The answer when the service could not decide: 400 for a field it refuses, else 503 with
/// `Retry-After: 1`.
fn refusal(e: &RequestError) -> Response {
    if e.is_invalid_argument() {
        return error(StatusCode::BAD_REQUEST, "invalid_field", &e.to_string());
    }
    let code = match e {
        RequestError::NoConfig => "no_config",
        _ => "unavailable",
    };
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, code, &e.to_string());
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// One limit of the answer's `limits` (with `"details": true`).
fn limit_details(l: &AppliedLimit) -> Value {
    let mut limit = json!({
        "name": l.name,
        "limit": l.quota,
        "window": l.window.secs(),
        "remaining": l.remaining,
        "reset_after": l.reset_after,
        "retry_after": if l.over_limit { l.retry_after } else { 0 },
        "delay_ms": ceil_millis(l.delay),
        "over_limit": l.over_limit,
    });
    if l.debt > 0 {
        limit["debt"] = Value::from(l.debt);
    }
    limit
}

/// Adds rendered rate limit headers to an answer.
pub(crate) fn add_headers(r: &mut Response, pairs: &[(&'static str, String)]) {
    for (name, value) in pairs {
        // Names are fixed ASCII and values digits, quoted ASCII and `;=,`: both always valid.
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            r.headers_mut().insert(n, v);
        }
    }
}

/// Whole milliseconds in `d`, rounded up: a caller waiting this long is never early.
fn ceil_millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// A JSON error answer.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_answer(status, &json!({"error": code, "message": message}))
}

fn json_answer(status: StatusCode, body: &Value) -> Response {
    let content_type = [(header::CONTENT_TYPE, "application/json")];
    (status, content_type, body.to_string()).into_response()
}
