//! `POST /v1/counters/reset` (bearer token): forget what a client has used. The body names a
//! domain and either a descriptor — every limit's counter that descriptor's request would touch
//! is reset, whatever its algorithm — or a key prefix within the domain, reset a bounded number
//! of keys per call (`max_keys`, default 1000) with `more` saying whether keys remain. Unknown
//! domain 404, a bad body 400, an empty descriptor or a prefix outside the domain 422, a prefix
//! reset the store cannot do (memory, memcached) 409, the store failing 503; every refusal
//! changes nothing. A token of role `read` is refused (403). Each reset is audited ([`audit_reset`]):
//! a log line, and with the policy database open a row of its history (`counters.reset` on
//! `counters:<domain>`, with the token's name, the optional `reason` and what was reset).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::auth::Operator;
use super::explain::EntryBody;
use super::{AdminState, error, json};
use crate::explain::reset::{DEFAULT_MAX_KEYS, ResetDone, ResetRefused, ResetTarget};
use crate::policy::history::Event;

/// The longest `reason` a reset takes, as a policy change's.
const MAX_REASON: usize = crate::policy::history::MAX_REASON;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    domain: String,
    #[serde(default)]
    descriptor: Option<Vec<EntryBody>>,
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    max_keys: Option<usize>,
    /// Why, for the history (optional).
    #[serde(default)]
    reason: Option<String>,
}

const SHAPE: &str = "expected {\"domain\": \"…\", \"descriptor\": [{\"key\": \"…\", \"value\": \"…\"}]} \
     or {\"domain\": \"…\", \"prefix\": \"…\", \"max_keys\": 1000}";

/// Resets the body's descriptor or prefix.
pub(crate) async fn reset(op: Operator, State(s): State<AdminState>, body: Bytes) -> Response {
    let (explainer, body) = match super::explain::read::<Body>(&s, "reset", &body, SHAPE) {
        Ok(read) => read,
        Err(refused) => return *refused,
    };
    let target = match (body.descriptor, body.prefix) {
        (Some(d), None) if body.max_keys.is_none() => {
            ResetTarget::Descriptor(d.into_iter().map(|e| (e.key, e.value)).collect())
        }
        (None, Some(prefix)) if !prefix.is_empty() => ResetTarget::Prefix {
            prefix,
            max_keys: body.max_keys.unwrap_or(DEFAULT_MAX_KEYS),
        },
        (None, Some(_)) => return error(StatusCode::UNPROCESSABLE_ENTITY, "prefix: empty"),
        _ => {
            let msg = format!(
                "give either descriptor or prefix (with an optional max_keys), not both; {SHAPE}"
            );
            return error(StatusCode::UNPROCESSABLE_ENTITY, msg);
        }
    };
    let reason = body.reason.unwrap_or_default();
    if reason.len() > MAX_REASON {
        let msg = format!("reason: at most {MAX_REASON} bytes");
        return error(StatusCode::UNPROCESSABLE_ENTITY, msg);
    }
    match explainer.reset(&body.domain, &target).await {
        Ok(done) => {
            let answer = answer(&body.domain, &target, &done);
            audit_reset(&op.who, &body.domain, &target, &done);
            if let Ok(policy) = &s.policy {
                let event = Event {
                    kind: "counters.reset".into(),
                    target: format!("counters:{}", body.domain),
                    actor: op.who.clone(),
                    reason,
                    before: None,
                    after: Some(answer.clone()),
                };
                // The counters are already reset: a history that cannot be written is logged,
                // not answered as a failed reset.
                if let Err(e) = policy.record_event(event).await {
                    tracing::warn!(error = %e, domain = %body.domain, "counter reset not recorded in the history");
                }
            }
            json(StatusCode::OK, &answer)
        }
        Err(e) => {
            let status = match &e {
                ResetRefused::UnknownDomain(..) => StatusCode::NOT_FOUND,
                ResetRefused::Invalid(..) => StatusCode::UNPROCESSABLE_ENTITY,
                ResetRefused::Unsupported(_) => StatusCode::CONFLICT,
                ResetRefused::Unavailable(_) => {
                    tracing::warn!(error = %e, domain = %body.domain, "counter reset failed");
                    StatusCode::SERVICE_UNAVAILABLE
                }
            };
            error(status, e)
        }
    }
}

/// The answer: what was aimed at and how many keys held state.
fn answer(domain: &str, target: &ResetTarget, done: &ResetDone) -> serde_json::Value {
    match target {
        ResetTarget::Descriptor(_) => json!({
            "domain": domain,
            "target": target.describe(),
            "keys": done.keys,
            "reset": done.reset,
            "more": false,
        }),
        ResetTarget::Prefix { max_keys, .. } => json!({
            "domain": domain,
            "target": target.describe(),
            "max_keys": max_keys,
            "reset": done.reset,
            "more": done.more,
        }),
    }
}

/// The audit record of one reset: who (the token's name), the domain, the target and how many
/// keys were reset, as one structured log line (`target: audit`). The one place a reset is
/// recorded; an audit history store hooks in here.
pub(crate) fn audit_reset(who: &str, domain: &str, target: &ResetTarget, done: &ResetDone) {
    tracing::info!(
        target: "audit",
        action = "counters.reset",
        token = who,
        domain,
        reset_target = %target.describe(),
        reset = done.reset,
        more = done.more,
        "counters reset"
    );
}
