//! `POST /v1/explain` (bearer token): for `{domain, descriptors: [{entries: [{key, value}]}]}`
//! — the shape of `POST /check` — which limits and overrides apply to each descriptor, their live
//! counters and the key's recent violations, counting no hit ([`crate::explain`]). A malformed
//! body answers 400 naming the field and what is accepted.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::auth::Admin;
use super::{AdminState, error, json};
use ratelimitd_core::config::Unit;
use ratelimitd_core::limiter::Override;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    domain: String,
    descriptors: Vec<DescriptorBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorBody {
    entries: Vec<EntryBody>,
    /// The request's own limit, as `POST /check` takes it.
    #[serde(default)]
    limit: Option<LimitBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitBody {
    #[serde(rename = "requestsPerUnit", alias = "requests_per_unit")]
    requests_per_unit: u32,
    unit: String,
}

/// One entry of a descriptor in a request body: `{"key", "value"}` (the value empty when left
/// out).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EntryBody {
    pub(super) key: String,
    #[serde(default)]
    pub(super) value: String,
}

impl Body {
    fn into_parts(self) -> (String, Vec<Vec<(String, String)>>) {
        let descriptors = (self.descriptors.into_iter())
            .map(|d| d.entries.into_iter().map(|e| (e.key, e.value)).collect())
            .collect();
        (self.domain, descriptors)
    }
}

/// An explain body given as JSON (a dry run's `sample`): its domain and descriptors' entries. A
/// dry run judges a sample by the rules alone, so a descriptor's own `limit` is refused rather
/// than ignored.
pub(crate) fn parse_body(v: serde_json::Value) -> Result<super::change::Sample, String> {
    let body: Body = serde_json::from_value(v).map_err(|e| format!("invalid sample: {e}"))?;
    if let Some(i) = body.descriptors.iter().position(|d| d.limit.is_some()) {
        return Err(format!(
            "invalid sample: descriptors[{i}].limit: a dry run judges the rules, not a request's own limit; leave it out"
        ));
    }
    Ok(body.into_parts())
}

/// What `POST /v1/explain` expects.
const SHAPE: &str = "expected {\"domain\": \"…\", \"descriptors\": [{\"entries\": [{\"key\": \"…\", \"value\": \"…\"}]}]}";

/// The head of the requests explain serves (`what`: explain, reset): the explainer, 503 when it
/// is not wired, and the JSON body, 400 with the `shape` expected when it does not read.
pub(super) fn read<'s, T: serde::de::DeserializeOwned>(
    s: &'s AdminState,
    what: &str,
    body: &[u8],
    shape: &str,
) -> Result<(&'s crate::explain::Explainer, T), Box<Response>> {
    let Some(explainer) = &s.explainer else {
        let msg = format!("{what} is not wired");
        return Err(Box::new(error(StatusCode::SERVICE_UNAVAILABLE, msg)));
    };
    match serde_json::from_slice(body) {
        Ok(b) => Ok((explainer, b)),
        Err(e) => {
            let msg = format!("invalid body: {e}; {shape}");
            Err(Box::new(error(StatusCode::BAD_REQUEST, msg)))
        }
    }
}

/// Explains the body's descriptors.
pub(crate) async fn explain(_: Admin, State(s): State<AdminState>, body: Bytes) -> Response {
    let (explainer, body) = match read::<Body>(&s, "explain", &body, SHAPE) {
        Ok(read) => read,
        Err(refused) => return *refused,
    };
    let mut limits = Vec::with_capacity(body.descriptors.len());
    for (i, d) in body.descriptors.iter().enumerate() {
        let Some(l) = &d.limit else {
            limits.push(None);
            continue;
        };
        let Some(unit) = Unit::parse(&l.unit.to_ascii_lowercase()) else {
            let msg = format!(
                "descriptors[{i}].limit.unit: invalid unit '{}' ({})",
                l.unit,
                Unit::EXPECTED
            );
            return error(StatusCode::BAD_REQUEST, msg);
        };
        limits.push(Some(Override {
            requests_per_unit: l.requests_per_unit,
            unit: Some(unit),
        }));
    }
    let (domain, descriptors) = body.into_parts();
    match (explainer.explain_limited(&domain, &descriptors, &limits, true)).await {
        Ok(found) => json(StatusCode::OK, &found.to_json()),
        Err(e) => error(StatusCode::BAD_REQUEST, e),
    }
}
