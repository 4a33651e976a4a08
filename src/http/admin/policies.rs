//! `GET /v1/policies?domain=…`, `GET/PUT/DELETE /v1/policies/{id}`, `GET
//! /v1/policies/{id}/history`, `POST /v1/policies/{id}/rollback`: rules that compile, with the
//! configuration validator, into the one snapshot next to the file domains. A change is checked
//! against the files in service first (422 with every error), then stored with its history row,
//! then swapped in — never half-applied — all under the policy's write lock. `?dry_run=true`
//! stops after the check and answers what would change.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use serde_json::Value;

use super::auth::{PolicyAdmin, PolicyWriter};
use super::change::{DeleteRequest, ObjectChange};
use super::{AdminState, change, error, invalid, json, listed, not_found, one};
use crate::policy::history::{self, Audit, policy_target, rule_event};
use crate::policy::rules::{Rule, parse_rule, to_files};
use crate::policy::{FieldError, Policy};
use ratelimitd_core::config::RateLimitConfig;

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
/// The body may carry a `reason` (recorded in the history) and, with `?dry_run=true`, a `sample`.
pub(crate) async fn put(
    PolicyWriter { who, policy }: PolicyWriter,
    State(s): State<AdminState>,
    Path(id): Path<String>,
    change: ObjectChange,
) -> Response {
    let ObjectChange {
        dry,
        obj,
        reason,
        sample,
        mut errors,
    } = change;
    let rule = match parse_rule(&id, Value::Object(obj).to_string().as_bytes()) {
        Ok(rule) if errors.is_empty() => rule,
        Ok(_) => return invalid(&errors),
        Err(more) => {
            errors.extend(more);
            return invalid(&errors);
        }
    };
    let audit = Audit::new(&who, &reason);
    write_rule(&s, &policy, rule, audit, (dry, sample.as_ref())).await
}

/// Checks `rule` against the files, then stores it with its history row and puts it in service
/// (201 created, 200 replaced) — or, on a dry run, answers what would change.
async fn write_rule(
    s: &AdminState,
    policy: &Policy,
    rule: Rule,
    audit: Audit,
    (dry, sample): (bool, Option<&change::Sample>),
) -> Response {
    let _one = policy.lock_writes().await;
    let mut rules = match policy.rules().await {
        Ok(rules) => rules,
        Err(e) => return super::unavailable(e),
    };
    let before = rules.iter().find(|r| r.id == rule.id).cloned();
    rules.retain(|r| r.id != rule.id);
    rules.push(rule.clone());
    let config = match check_then(s, &rules).await {
        Ok(config) => config,
        Err(response) => return response,
    };
    if dry {
        let kind = rule_event(before.as_ref(), Some(&rule), &audit).kind;
        let states = (before.as_ref().map(Rule::to_json), Some(rule.to_json()));
        let what_if = change::WhatIf {
            config: Some(&config),
            overrides: None,
        };
        let target = policy_target(&rule.id);
        return change::answer_dry_run(s, (&kind, &target), states, sample, what_if).await;
    }
    let entry = match policy.put_rule(&rule, &audit).await {
        Ok(entry) => entry,
        Err(e) => return super::unavailable(e),
    };
    if let Err(response) = publish(s, &rules).await {
        return response;
    }
    let (who, id, reason) = (&audit.who, &rule.id, &audit.reason);
    tracing::info!(who, id, reason, version = entry.version, rule = %rule.to_json(), "policy: rule {}", entry.event.kind);
    let status = if before.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let mut body = rule.to_json();
    body["version"] = entry.version.into();
    json(status, &body)
}

/// Deletes a rule (204), or 404. The body may carry a `reason`; `?dry_run=true` answers what
/// would change (and, for a `sample`, what explain would say) without deleting.
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
    let audit = Audit::new(&who, &reason);
    let _one = policy.lock_writes().await;
    let mut rules = match policy.rules().await {
        Ok(rules) => rules,
        Err(e) => return super::unavailable(e),
    };
    let Some(before) = rules.iter().find(|r| r.id == id).cloned() else {
        return not_found("policy", &id);
    };
    rules.retain(|r| r.id != id);
    let config = match check_then(&s, &rules).await {
        Ok(config) => config,
        Err(response) => return response,
    };
    if dry {
        let what_if = change::WhatIf {
            config: Some(&config),
            overrides: None,
        };
        let (kind, target) = (history::kind::POLICY_DELETE, policy_target(&id));
        let states = (Some(before.to_json()), None);
        return change::answer_dry_run(&s, (kind, &target), states, sample.as_ref(), what_if).await;
    }
    match policy.delete_rule(&id, &audit).await {
        Ok(_) => {}
        Err(e) => return super::unavailable(e),
    }
    if let Err(response) = publish(&s, &rules).await {
        return response;
    }
    tracing::info!(who, id, reason, "policy: rule deleted");
    StatusCode::NO_CONTENT.into_response()
}

/// `GET /v1/policies/{id}/history`: the rule's versions, newest first, paged.
pub(crate) async fn history(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    super::history::page(&policy, &q, Some(policy_target(&id))).await
}

/// `POST /v1/policies/{id}/rollback` `{"version": N, "reason"?, "sample"?}`: puts the rule back as
/// it was at version N — a new version whose kind is `policy.rollback`; a deleted rule is
/// created again. 404 for a version the rule never had; 422 when version N is the rule's
/// deletion (nothing to put back) or the rule no longer compiles with the files in service.
pub(crate) async fn rollback(
    PolicyWriter { who, policy }: PolicyWriter,
    State(s): State<AdminState>,
    Path(id): Path<String>,
    change: ObjectChange,
) -> Response {
    let ObjectChange {
        dry,
        mut obj,
        reason,
        sample,
        mut errors,
    } = change;
    let version = match obj.remove("version") {
        Some(v) => match v.as_u64().filter(|n| *n >= 1 && i64::try_from(*n).is_ok()) {
            Some(n) => n,
            None => {
                errors.push(FieldError::new(
                    "version",
                    format!("expected a version number from 1, got {v}"),
                ));
                0
            }
        },
        None => {
            errors.push(FieldError::new("version", "is required"));
            0
        }
    };
    change::only(&obj, &["version", "reason", "sample"], &mut errors);
    if !errors.is_empty() {
        return invalid(&errors);
    }
    let target = policy_target(&id);
    let entry = match policy.history_version(&target, version).await {
        Ok(Some(entry)) => entry,
        Ok(None) => {
            let msg = format!(
                "policy '{id}' has no version {version} (see GET /v1/policies/{id}/history)"
            );
            return error(StatusCode::NOT_FOUND, msg);
        }
        Err(e) => return super::unavailable(e),
    };
    let Some(Value::Object(mut state)) = entry.event.after else {
        let msg = format!(
            "version {version} of policy '{id}' is its deletion: there is nothing to put back \
             (roll back to an earlier version, or DELETE the policy)"
        );
        return invalid(&[FieldError::new("version", msg)]);
    };
    state.remove("id");
    let rule = match parse_rule(&id, Value::Object(state).to_string().as_bytes()) {
        Ok(rule) => rule,
        Err(errors) => return invalid(&errors),
    };
    let audit = Audit {
        rollback_of: Some(version),
        ..Audit::new(&who, &reason)
    };
    write_rule(&s, &policy, rule, audit, (dry, sample.as_ref())).await
}

/// 422 with one error per line of the validator's report when `rules` would not compile with the
/// files in service.
async fn check_then(s: &AdminState, rules: &[Rule]) -> Result<RateLimitConfig, Response> {
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
