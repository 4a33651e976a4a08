//! `GET /v1/hotkeys?by=hits|denials&limit=N`: the hottest keys over the last minute, hottest
//! first (default `by=hits`, `limit=10`, at most 1000). The keys are client data, so the bearer
//! token is required as on every `/v1` endpoint; the policy database is not.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::auth::Admin;
use super::{AdminState, error, json};
use crate::insight::hotkeys::{By, Ranked};

/// Most rows one answer carries.
const MAX_LIMIT: usize = 1000;

/// The ranking asked for, as JSON.
pub(crate) async fn list(
    _: Admin,
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let by = match q.get("by").map(String::as_str) {
        None => By::Hits,
        Some(b) => match By::parse(b) {
            Some(by) => by,
            None => {
                let why = format!("by: expected hits or denials, got {b:?}");
                return error(StatusCode::BAD_REQUEST, why);
            }
        },
    };
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 10,
        Some(Ok(n)) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => {
            let why = format!("limit: expected a whole number from 1 to {MAX_LIMIT}");
            return error(StatusCode::BAD_REQUEST, why);
        }
    };
    let Some(insight) = &s.insight else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "hot keys are not tracked");
    };
    let rows = insight.hot_keys.top(by, limit);
    let keys: Vec<serde_json::Value> = rows.iter().enumerate().map(row).collect();
    json(
        StatusCode::OK,
        &json!({ "by": by.as_str(), "window_seconds": 60, "keys": keys }),
    )
}

fn row((i, r): (usize, &Ranked)) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = (r.key.entries.iter())
        .map(|(k, v)| json!({ "key": k, "value": v }))
        .collect();
    json!({
        "rank": i + 1,
        "domain": r.key.domain,
        "entries": entries,
        "limit": r.key.limit,
        "count": r.count,
        "error": r.error,
    })
}
