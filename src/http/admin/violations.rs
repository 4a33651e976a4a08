//! `GET /v1/violations?domain=&client_key=&since=&until=&limit=&cursor=`: the violation log,
//! newest first, a page at a time. It reveals client data, so it needs the bearer token like every
//! `/v1/` route; bad parameters answer 422 with every error.

use std::collections::HashMap;

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;

use super::auth::PolicyAdmin;
use super::{invalid, json, unavailable};
use crate::policy::violations::{Cursor, ViolationQuery};

/// One page of violations; `next_cursor` is set when more records follow.
pub(crate) async fn list(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let q = match ViolationQuery::parse(&params) {
        Ok(q) => q,
        Err(errors) => return invalid(&errors),
    };
    let mut rows = match policy.store().violations(&q).await {
        Ok(rows) => rows,
        Err(e) => return unavailable(e),
    };
    // The store reads one row more than a page: its presence says a next page exists.
    let more = rows.len() > q.limit as usize;
    rows.truncate(q.limit as usize);
    let next = rows.last().filter(|_| more).map(|last| {
        Cursor {
            at: last.violation.at,
            id: last.id.clone(),
        }
        .encode()
    });
    let items: Vec<_> = rows
        .iter()
        .map(crate::policy::violations::StoredViolation::to_json)
        .collect();
    json(
        StatusCode::OK,
        &serde_json::json!({ "violations": items, "next_cursor": next }),
    )
}
