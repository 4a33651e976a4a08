//! What every change request of the policy API shares: `?dry_run=true`, the body's optional
//! `reason` (recorded in the history) and `sample` (a request in the shape of `POST /v1/explain`,
//! `{domain, descriptors: [{entries: [{key, value}]}]}`), and the dry run's answer — the target
//! before and after, the fields that differ, and for the sample what explain says of it with the
//! configuration in service and with the change applied — written without touching anything.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{AdminState, invalid, json as answer};
use crate::policy::FieldError;
use crate::policy::history::reason_field;
use ratelimitd_core::config::RateLimitConfig;
use ratelimitd_core::limiter::OverrideIndex;

/// The sample request of a dry run: a domain and its descriptors' entries.
pub(crate) type Sample = (String, Vec<Vec<(String, String)>>);

/// `?dry_run=` of a change request: absent or `false` writes, `true` only answers what would
/// change; other parameters and values are errors.
pub(crate) fn dry_run(params: &HashMap<String, String>) -> Result<bool, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut unknown: Vec<&String> = params.keys().filter(|k| *k != "dry_run").collect();
    unknown.sort();
    for k in unknown {
        errors.push(FieldError::new(
            k.as_str(),
            "unknown parameter (known: dry_run)",
        ));
    }
    let dry = match params.get("dry_run").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            let msg = format!("'{other}' is not true or false");
            errors.push(FieldError::new("dry_run", msg));
            false
        }
    };
    if errors.is_empty() {
        Ok(dry)
    } else {
        Err(errors)
    }
}

/// A change request whose body is a JSON object: `?dry_run=`, the object with its `reason` and
/// `sample` taken out (what is left is the change itself), and the problems found in those. As
/// a handler's last extractor it answers 400 when the query or the body's shape is wrong.
pub(crate) struct ObjectChange {
    /// `?dry_run=true`.
    pub dry: bool,
    /// The body without `reason` and `sample`.
    pub obj: Map<String, Value>,
    /// The history row's reason (empty when not given).
    pub reason: String,
    /// The dry run's sample request.
    pub sample: Option<Sample>,
    /// What is wrong with `reason` or `sample`; the handler adds the change's own problems.
    pub errors: Vec<FieldError>,
}

impl<S: Send + Sync> FromRequest<S> for ObjectChange {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let (dry, body) = query_and_body(req, state).await?;
        let mut obj = match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err(invalid(&[FieldError::new("", "expected a JSON object")])),
            Err(e) => {
                return Err(invalid(&[FieldError::new(
                    "",
                    format!("invalid JSON: {e}"),
                )]));
            }
        };
        let mut errors = Vec::new();
        let (reason, sample) = take_extras(&mut obj, &mut errors);
        Ok(ObjectChange {
            dry,
            obj,
            reason,
            sample,
            errors,
        })
    }
}

/// A delete request of the policy API: `?dry_run=` and the optional body `{"reason", "sample"}`
/// (both optional, nothing else). As a handler's last extractor it answers 400 when either is
/// wrong.
pub(crate) struct DeleteRequest {
    /// `?dry_run=true`.
    pub dry: bool,
    /// The history row's reason (empty when not given).
    pub reason: String,
    /// The dry run's sample request.
    pub sample: Option<Sample>,
}

impl<S: Send + Sync> FromRequest<S> for DeleteRequest {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let (dry, body) = query_and_body(req, state).await?;
        let mut obj = optional_object(&body).map_err(|errors| invalid(&errors))?;
        let mut errors = Vec::new();
        let (reason, sample) = take_extras(&mut obj, &mut errors);
        only(&obj, &["reason", "sample"], &mut errors);
        if !errors.is_empty() {
            return Err(invalid(&errors));
        }
        Ok(DeleteRequest {
            dry,
            reason,
            sample,
        })
    }
}

/// A change request's `?dry_run=` and its body, each refused as its own extractor would.
async fn query_and_body<S: Send + Sync>(
    req: Request,
    state: &S,
) -> Result<(bool, Bytes), Response> {
    let (mut parts, body) = req.into_parts();
    let Query(params) = Query::<HashMap<String, String>>::from_request_parts(&mut parts, state)
        .await
        .map_err(IntoResponse::into_response)?;
    let body = Bytes::from_request(Request::from_parts(parts, body), state)
        .await
        .map_err(IntoResponse::into_response)?;
    let dry = dry_run(&params).map_err(|errors| invalid(&errors))?;
    Ok((dry, body))
}

/// Takes `reason` and `sample` out of a change body (what is left is the change itself),
/// adding their problems to `errors`.
pub(crate) fn take_extras(
    body: &mut Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> (String, Option<Sample>) {
    let reason = reason_field(body.remove("reason").as_ref(), errors);
    (reason, take_sample(body, errors))
}

/// Takes `sample` out of a change body, adding its problem to `errors`.
pub(crate) fn take_sample(
    body: &mut Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Sample> {
    body.remove("sample").and_then(|v| match parse_sample(&v) {
        Ok(s) => Some(s),
        Err(why) => {
            errors.push(FieldError::new("sample", why));
            None
        }
    })
}

/// The body of a request whose body is optional (a delete): `{}` when empty; an object, or one
/// field error.
pub(crate) fn optional_object(body: &[u8]) -> Result<Map<String, Value>, Vec<FieldError>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(vec![FieldError::new("", "expected a JSON object")]),
        Err(e) => Err(vec![FieldError::new("", format!("invalid JSON: {e}"))]),
    }
}

/// Unknown fields of a body whose only fields are `known`.
pub(crate) fn only(body: &Map<String, Value>, known: &[&str], errors: &mut Vec<FieldError>) {
    for key in body.keys().filter(|k| !known.contains(&k.as_str())) {
        let msg = format!("unknown field (known: {})", known.join(", "));
        errors.push(FieldError::new(key, msg));
    }
}

fn parse_sample(v: &Value) -> Result<Sample, String> {
    let expected = "expected {\"domain\": \"…\", \"descriptors\": [{\"entries\": [{\"key\": \"…\", \"value\": \"…\"}]}]}";
    let parsed = super::explain::parse_body(v.clone()).map_err(|e| format!("{e}; {expected}"))?;
    crate::explain::check(&parsed.0, &parsed.1).map_err(|e| e.to_string())?;
    Ok(parsed)
}

/// The JSON paths at which `before` and `after` differ (`""` for the whole value).
pub(crate) fn changed_fields(before: &Value, after: &Value) -> Vec<String> {
    fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let at = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    let (l, r) = (
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                    );
                    walk(&at, l, r, out);
                }
            }
            _ if a != b => out.push(path.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", before, after, &mut out);
    out
}

/// What the change would do to the sample: judged as now and as after the change.
pub(crate) struct WhatIf<'a> {
    /// The configuration the change would put in service (`None`: the one in service).
    pub config: Option<&'a RateLimitConfig>,
    /// The overrides the change would leave in service (`None`: those in service).
    pub overrides: Option<&'a OverrideIndex>,
}

/// The dry run's answer (200): what would be recorded, and the sample's decisions.
pub(crate) async fn answer_dry_run(
    s: &AdminState,
    (kind, target): (&str, &str),
    (before, after): (Option<Value>, Option<Value>),
    sample: Option<&Sample>,
    what_if: WhatIf<'_>,
) -> Response {
    let changed = changed_fields(
        before.as_ref().unwrap_or(&Value::Null),
        after.as_ref().unwrap_or(&Value::Null),
    );
    let decision = match (sample, &s.explainer) {
        (None, _) => Value::Null,
        (Some(_), None) => json!({ "error": "explain is not wired" }),
        (Some((domain, descriptors)), Some(ex)) => {
            let now = ex.explain(domain, descriptors).await;
            let current = ex.config.snapshot();
            let config = match what_if.config {
                // A configuration not in service has no version yet.
                Some(c) => (Some(c), None),
                None => (
                    current.as_ref().map(|s| &s.config),
                    current.as_ref().map(|s| s.version),
                ),
            };
            let in_service = ex.overrides.load();
            let stored = what_if.overrides.unwrap_or(&in_service);
            let then = ex
                .explain_in(config, stored, domain, descriptors, &[], false)
                .await;
            let show = |r: Result<crate::explain::Explained, crate::explain::ExplainError>| match r
            {
                Ok(e) => e.to_json(),
                Err(e) => json!({ "error": e.to_string() }),
            };
            json!({ "now": show(now), "after": show(then) })
        }
    };
    answer(
        StatusCode::OK,
        &json!({
            "dry_run": true,
            "kind": kind,
            "target": target,
            "before": before,
            "after": after,
            "changed": changed,
            "decision": decision,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_is_true_false_or_absent() {
        let q = |pairs: &[(&str, &str)]| {
            dry_run(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        assert!(!q(&[]).unwrap());
        assert!(q(&[("dry_run", "true")]).unwrap());
        assert_eq!(q(&[("dry_run", "yes")]).unwrap_err()[0].field, "dry_run");
        assert_eq!(q(&[("dryrun", "true")]).unwrap_err()[0].field, "dryrun");
    }

    #[test]
    fn changed_fields_name_every_difference() {
        let a = json!({"id": "r", "rate_limit": {"unit": "second", "requests_per_unit": 1}});
        let b = json!({"id": "r", "rate_limit": {"unit": "minute", "requests_per_unit": 1}, "enabled": false});
        assert_eq!(changed_fields(&a, &b), ["enabled", "rate_limit.unit"]);
        assert_eq!(changed_fields(&Value::Null, &b), [""]);
        assert!(changed_fields(&a, &a).is_empty());
    }
}
