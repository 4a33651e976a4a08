//! `POST /v1/overrides` (201 `{"id"}`), `GET /v1/overrides[?domain=&limit=&cursor=]` (a page,
//! newest first, with `next_cursor` like `/v1/violations`), `GET /v1/overrides/{id}`
//! (404 when unknown), `DELETE /v1/overrides/{id}` (204).
//! Every change is logged with the token's name and what changed.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use serde_json::Value;

use super::auth::{PolicyAdmin, PolicyWriter};
use super::change::DeleteRequest;
use super::{AdminState, change, invalid, json, not_found, one, unavailable};
use crate::policy::history::{Audit, kind, override_json, override_target};
use crate::policy::input::parse_override;
use crate::policy::override_sql::OverridePage;
use crate::policy::runtime::WriteError;
use crate::policy::violations::Cursor;
use crate::policy::{FieldError, StoredOverride};

/// Creates an override; it is in service on this instance when the answer is sent. Its own
/// `reason` is the history row's. `?dry_run=true` (with an optional `sample`) answers what would
/// change instead.
pub(crate) async fn create(
    PolicyWriter { who, policy }: PolicyWriter,
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let dry = match change::dry_run(&q) {
        Ok(dry) => dry,
        Err(errors) => return invalid(&errors),
    };
    // `sample` belongs to the dry run, the rest to the override.
    let mut sample = None;
    let mut body = body.to_vec();
    if let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(&body)
        && obj.contains_key("sample")
    {
        let mut errors = Vec::new();
        sample = change::take_sample(&mut obj, &mut errors);
        if !errors.is_empty() {
            return invalid(&errors);
        }
        body = Value::Object(obj).to_string().into_bytes();
    }
    let spec = match parse_override(&body, policy.clock().now()) {
        Ok(spec) => spec,
        Err(errors) => return invalid(&errors),
    };
    if dry {
        let now = policy.clock().now();
        let o = StoredOverride {
            id: "ov_dry_run".into(),
            spec,
            created_by: who,
            created_at: now,
        };
        let after = policy.overrides_in_service().with(o.clone(), now);
        let what_if = change::WhatIf {
            config: None,
            overrides: Some(&after),
        };
        let states = (None, Some(override_json(&o)));
        let ids = (kind::OVERRIDE_CREATE, "override:ov_dry_run");
        return change::answer_dry_run(&s, ids, states, sample.as_ref(), what_if).await;
    }
    match policy.create_override(spec, &Audit::new(&who, "")).await {
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

/// Deletes an override: the configured limit applies again at once on this instance. The body
/// may carry a `reason`; `?dry_run=true` answers what would change instead.
pub(crate) async fn remove(
    PolicyWriter { who, policy }: PolicyWriter,
    State(s): State<AdminState>,
    Path(id): Path<String>,
    DeleteRequest {
        dry,
        reason,
        sample,
    }: DeleteRequest,
) -> Response {
    if dry {
        let stored = match policy.list_overrides().await {
            Ok(all) => all.into_iter().find(|o| o.id == id),
            Err(e) => return unavailable(e),
        };
        let Some(before) = stored else {
            return not_found("override", &id);
        };
        let after = policy.overrides_in_service().without(&id);
        let what_if = change::WhatIf {
            config: None,
            overrides: Some(&after),
        };
        let states = (Some(override_json(&before)), None);
        let target = override_target(&id);
        return change::answer_dry_run(
            &s,
            (kind::OVERRIDE_DELETE, &target),
            states,
            sample.as_ref(),
            what_if,
        )
        .await;
    }
    match policy
        .delete_override(&id, &Audit::new(&who, &reason))
        .await
    {
        Ok(true) => {
            tracing::info!(who, id, reason, "policy: override deleted");
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => not_found("override", &id),
        Err(e) => unavailable(e),
    }
}

/// `GET /v1/overrides/{id}/history`: the override's creation and deletion, newest first.
pub(crate) async fn history(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    super::history::page(&policy, &q, Some(override_target(&id))).await
}
