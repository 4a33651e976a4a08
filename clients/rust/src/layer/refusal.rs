//! The responses the layer writes itself instead of calling the service: a `429` carrying
//! ratelimitd's headers, a `429` from the local fallback limit, a `503` when failing closed, and a
//! `500` when ratelimitd refused the question (a bug in the key extractor, not the caller's fault).

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::check::Decision;
use crate::error::Error;
use crate::policy::LocalLimit;

/// `429` for a denial by ratelimitd, with every rate limit header of its answer.
pub(crate) fn denied(d: &Decision) -> Response<Full<Bytes>> {
    let secs = d.retry_after.as_secs();
    let mut r = respond(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"error": "rate_limited", "message": format!("over the rate limit: retry after {secs} s"), "retry_after": secs}),
    );
    d.apply_headers(r.headers_mut());
    // ratelimitd always sends Retry-After on 429; should a proxy have stripped it, the body's value
    // still reaches the caller.
    r.headers_mut()
        .entry(RETRY_AFTER)
        .or_insert_with(|| seconds(d.retry_after));
    r
}

/// `429` from the local fallback limit, with draft-10 fields naming the local window.
pub(crate) fn locally_denied(limit: &LocalLimit, retry_after: Duration) -> Response<Full<Bytes>> {
    let secs = retry_after.as_secs();
    let mut r = respond(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"error": "rate_limited", "message": format!("over the local fallback limit: retry after {secs} s"), "retry_after": secs}),
    );
    let window = limit.window().as_secs().max(1);
    let h = r.headers_mut();
    h.insert(RETRY_AFTER, seconds(retry_after));
    let policy = format!("\"local\";q={};w={window}", limit.limit());
    let state = format!("\"local\";r=0;t={secs}");
    for (name, value) in [("ratelimit-policy", policy), ("ratelimit", state)] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    r
}

/// `503` when ratelimitd cannot answer and the policy is to fail closed.
pub(crate) fn closed(e: &Error) -> Response<Full<Bytes>> {
    let mut r = respond(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": "rate_limit_unavailable", "message": format!("the rate limit cannot be checked: {e}")}),
    );
    r.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// `500` when ratelimitd refused the check as malformed.
pub(crate) fn misconfigured(e: &Error) -> Response<Full<Bytes>> {
    respond(
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"error": "rate_limit_misconfigured", "message": e.to_string()}),
    )
}

fn respond(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn seconds(d: Duration) -> HeaderValue {
    HeaderValue::from(d.as_secs().max(1))
}
