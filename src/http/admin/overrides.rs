//! `POST /v1/overrides` (201 `{"id"}`), `GET /v1/overrides[?domain=&limit=&cursor=]` (a page,
//! newest first, with `next_cursor` like `/v1/violations`), `GET /v1/overrides/{id}`
//! (404 when unknown), `DELETE /v1/overrides/{id}` (204).
//! Every change is logged with the token's name and what changed.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::auth::PolicyAdmin;
use super::{invalid, json, not_found, one, unavailable};
use crate::policy::FieldError;
use crate::policy::input::parse_override;
use crate::policy::override_sql::OverridePage;
use crate::policy::runtime::WriteError;
use crate::policy::violations::Cursor;

/// Creates an override; it is in service on this instance when the answer is sent.
pub(crate) async fn create(PolicyAdmin { who, policy }: PolicyAdmin, body: Bytes) -> Response {
    let spec = match parse_override(&body, policy.clock().now()) {
        Ok(spec) => spec,
        Err(errors) => return invalid(&errors),
    };
    match policy.create_override(spec, &who).await {
        Ok(o) => {
            tracing::info!(
                who,
                id = %o.id,
                domain = %o.spec.domain,
                descriptor = %serde_json::to_string(&o.spec.descriptor).unwrap_or_default(),
                requests_per_unit = o.spec.requests_per_unit,
                unit = o.spec.unit.as_str(),
                valid_until = %o.spec.valid_until.to_rfc3339(),
                reason = %o.spec.reason,
                "policy: override created"
            );
            json(StatusCode::CREATED, &serde_json::json!({ "id": o.id }))
        }
        Err(e @ WriteError::TooMany(_)) => invalid(&[FieldError::new("", e.to_string())]),
        Err(WriteError::Store(e)) => unavailable(e),
    }
}

/// One page of stored overrides (of `?domain=` when given), newest first, expired ones with
/// `"active": false`; `next_cursor` is set when more follow (`?limit=`, default 100, at most 1000).
pub(crate) async fn list(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let page = match OverridePage::parse(&params) {
        Ok(page) => page,
        Err(errors) => return invalid(&errors),
    };
    let mut rows = match policy.overrides_page(&page).await {
        Ok(rows) => rows,
        Err(e) => return unavailable(e),
    };
    let next = page.next_cursor(&mut rows, |o| Cursor {
        at: o.created_at,
        id: o.id.clone(),
    });
    let now = policy.clock().now();
    let items: Vec<_> = rows.iter().map(|o| o.to_json(now)).collect();
    json(
        StatusCode::OK,
        &serde_json::json!({ "overrides": items, "next_cursor": next }),
    )
}

/// One stored override (expired ones too), 404 when unknown.
pub(crate) async fn get(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Path(id): Path<String>,
) -> Response {
    let now = policy.clock().now();
    one(
        policy.list_overrides().await,
        ("override", &id),
        |o, id| o.id == id,
        |o| o.to_json(now),
    )
}

/// Deletes an override: the configured limit applies again at once on this instance.
pub(crate) async fn remove(
    PolicyAdmin { who, policy }: PolicyAdmin,
    Path(id): Path<String>,
) -> Response {
    match policy.delete_override(&id).await {
        Ok(true) => {
            tracing::info!(who, id, "policy: override deleted");
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => not_found("override", &id),
        Err(e) => unavailable(e),
    }
}
