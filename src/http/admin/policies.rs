//! `GET /v1/policies?domain=…`, `GET/PUT/DELETE /v1/policies/{id}`: rules that compile, with the
//! configuration validator, into the one snapshot next to the file domains. A change is checked
//! against the files in service first (422 with every error), then stored, then swapped in — never
//! half-applied — all under the policy's write lock.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::auth::PolicyAdmin;
use super::{AdminState, error, invalid, json, listed, not_found, one};
use crate::policy::FieldError;
use crate::policy::rules::{Rule, parse_rule, to_files};

/// Lists the rules, of one domain with `?domain=`.
pub(crate) async fn list(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    listed(
        policy.rules().await,
        "policies",
        |r| q.get("domain").is_none_or(|d| *d == r.domain),
        Rule::to_json,
    )
}

/// One rule, or 404.
pub(crate) async fn get(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Path(id): Path<String>,
) -> Response {
    one(
        policy.rules().await,
        ("policy", &id),
        |r, id| r.id == id,
        Rule::to_json,
    )
}

/// Creates (201) or replaces (200) a rule; in service on this instance when the answer is sent.
pub(crate) async fn put(
    PolicyAdmin { who, policy }: PolicyAdmin,
    State(s): State<AdminState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let rule = match parse_rule(&id, &body) {
        Ok(rule) => rule,
        Err(errors) => return invalid(&errors),
    };
    let _one = policy.lock_writes().await;
    let mut rules = match policy.rules().await {
        Ok(rules) => rules,
        Err(e) => return super::unavailable(e),
    };
    let existed = rules.iter().any(|r| r.id == id);
    rules.retain(|r| r.id != id);
    rules.push(rule.clone());
    if let Err(response) = check_then(&s, &rules).await {
        return response;
    }
    if let Err(e) = policy.put_rule(&rule, &who).await {
        return super::unavailable(e);
    }
    if let Err(response) = publish(&s, &rules).await {
        return response;
    }
    tracing::info!(who, id, rule = %rule.to_json(), "policy: rule {}", if existed { "replaced" } else { "created" });
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    json(status, &rule.to_json())
}

/// Deletes a rule (204), or 404.
pub(crate) async fn remove(
    PolicyAdmin { who, policy }: PolicyAdmin,
    State(s): State<AdminState>,
    Path(id): Path<String>,
) -> Response {
    let _one = policy.lock_writes().await;
    let mut rules = match policy.rules().await {
        Ok(rules) => rules,
        Err(e) => return super::unavailable(e),
    };
    if !rules.iter().any(|r| r.id == id) {
        return not_found("policy", &id);
    }
    rules.retain(|r| r.id != id);
    if let Err(response) = check_then(&s, &rules).await {
        return response;
    }
    match policy.delete_rule(&id).await {
        Ok(_) => {}
        Err(e) => return super::unavailable(e),
    }
    if let Err(response) = publish(&s, &rules).await {
        return response;
    }
    tracing::info!(who, id, "policy: rule deleted");
    StatusCode::NO_CONTENT.into_response()
}

/// 422 with one error per line of the validator's report when `rules` would not compile with the
/// files in service.
async fn check_then(s: &AdminState, rules: &[Rule]) -> Result<(), Response> {
    s.reloading
        .check_extra(to_files(rules))
        .await
        .map_err(|errors| {
            let errors: Vec<FieldError> = errors.lines().map(|l| FieldError::new("", l)).collect();
            invalid(&errors)
        })
}

async fn publish(s: &AdminState, rules: &[Rule]) -> Result<(), Response> {
    // The check passed moments ago; a failure now means the files changed in between.
    s.reloading
        .set_extra(to_files(rules))
        .await
        .map(|_| ())
        .map_err(|e| {
            error(
                StatusCode::CONFLICT,
                format!("stored, but not in service yet: {e}"),
            )
        })
}
