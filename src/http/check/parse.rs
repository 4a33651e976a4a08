//! A `POST /check` body checked field by field and mapped onto the descriptor model:
//! `[client_key=<client_key>]`, plus `[client_key=<client_key>, endpoint=<endpoint>]` when an
//! endpoint is given, then any descriptors sent in `/json` form. `cost` becomes every
//! descriptor's `hits_addend` (0 checks without counting), unless a sent descriptor has its own.
//! `max_wait_ms` is the delay the caller accepts: leaky bucket limits then shape instead of deny.
//! `priority` names the request's class for every limit with priorities whose `priority_key`
//! entry a descriptor does not carry itself. `report: true` makes `cost` usage reported after
//! the fact (an LLM response's tokens): counted even past the limit, never refused.
//!
//! The body is read as a JSON object first and each field checked by hand, so every error names
//! its field (serde's type errors only give a line and column). Reading it builds no more than
//! the caps allow: scalar fields keep only their value (a nested list in `cost` is skipped, not
//! built), and `descriptors` is decoded under `MAX_DESCRIPTORS_PER_REQUEST` /
//! `MAX_ENTRIES_PER_DESCRIPTOR`, stopping at the first one past its cap.

use std::cell::Cell;
use std::fmt;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::http::capped::{Caps, Descriptors, ScalarSeed, once};
use crate::http::json::{JsonDescriptor, JsonError, decode, descriptors_of};
use ratelimitd_core::algorithm::token_bucket;
use ratelimitd_core::config::shedding::MAX_CLASS_NAME;
use ratelimitd_core::limiter::Limits;
use ratelimitd_core::limiter::{Descriptor, Entry, Request};

/// The largest `cost` one request may carry.
pub(crate) const MAX_COST: u64 = 1_000_000_000;

/// The largest `max_wait_ms`: a minute ([`token_bucket::MAX_WAIT`], how far a leaky bucket
/// reserves slots). A caller holding a request longer is better told 429.
pub(crate) const MAX_WAIT_MS: u64 = token_bucket::MAX_WAIT.as_millis() as u64;

/// The descriptor key `client_key` maps to.
pub(crate) const CLIENT_KEY: &str = "client_key";
/// The descriptor key `endpoint` maps to.
pub(crate) const ENDPOINT: &str = "endpoint";

/// The members a `/check` body may have.
const FIELD_NAMES: &[&str] = &[
    "client_key",
    "endpoint",
    "cost",
    "max_wait_ms",
    "domain",
    "descriptors",
    "details",
    "holder",
    "release",
    "priority",
    "report",
];

/// Why a `/check` body was refused. Nothing is counted for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CheckError {
    /// Not JSON at all.
    #[error("body is not valid JSON: {0}")]
    Malformed(String),
    /// JSON, but not an object.
    #[error("body must be a JSON object")]
    NotObject,
    /// One field is missing, of the wrong type or out of range.
    #[error("{field}: {reason}")]
    Field {
        /// The field's name.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl CheckError {
    /// The short machine-readable code for the `error` member of the answer.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            CheckError::Malformed(_) | CheckError::NotObject => "malformed_json",
            CheckError::Field { .. } => "invalid_field",
        }
    }

    pub(super) fn field(field: &str, reason: impl Into<String>) -> CheckError {
        CheckError::Field {
            field: field.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A checked `/check` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckRequest {
    /// The limiter request.
    pub request: Request,
    /// `details: true`: answer with every applied limit, not just the most constrained.
    pub details: bool,
    /// The holder of any concurrency slot the request takes or (`release`) gives back.
    pub holder: super::holder::Holder,
}

/// A body's members as read: the scalars as values, the descriptor list as sent.
#[derive(Default)]
struct Members {
    fields: Map<String, Value>,
    descriptors: Option<Vec<JsonDescriptor>>,
    /// The first member that is not one of [`FIELD_NAMES`] (the rest is skipped, unread).
    unknown: Option<String>,
}

/// Seed for the body object; `in_descriptors` is set while the descriptor list is read, so an
/// error there names the field.
struct BodySeed<'c, 'a> {
    caps: &'c Caps<'a>,
    in_descriptors: &'c Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for BodySeed<'_, '_> {
    type Value = Members;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Members, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BodySeed<'_, '_> {
    type Value = Members;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<String>()? {
            if m.unknown.is_some() {
                map.next_value::<IgnoredAny>()?;
            } else if key == "descriptors" {
                self.in_descriptors.set(true);
                let list = map.next_value_seed(Descriptors(self.caps))?;
                self.in_descriptors.set(false);
                once(&mut m.descriptors, "descriptors", list)?;
            } else if FIELD_NAMES.contains(&key.as_str()) {
                let value = map.next_value_seed(ScalarSeed)?;
                if m.fields.insert(key, value).is_some() {
                    return Err(de::Error::custom("a member is given twice"));
                }
            } else {
                map.next_value::<IgnoredAny>()?;
                m.unknown = Some(key);
            }
        }
        Ok(m)
    }
}

/// Reads the members of `body` under `limits`.
fn members(body: &[u8], limits: &Limits) -> Result<Members, CheckError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(match serde_json::from_slice::<IgnoredAny>(body) {
            Ok(_) => CheckError::NotObject,
            Err(e) => CheckError::Malformed(e.to_string()),
        });
    }
    let caps = Caps::new(limits);
    let in_descriptors = Cell::new(false);
    let seed = BodySeed {
        caps: &caps,
        in_descriptors: &in_descriptors,
    };
    decode(body, &caps, seed).map_err(|e| match e {
        JsonError::OverCap(over) => CheckError::field("descriptors", over.to_string()),
        e if in_descriptors.get() => CheckError::field("descriptors", e.to_string()),
        JsonError::Syntax(e) => CheckError::Malformed(e.to_string()),
        e => CheckError::Malformed(e.to_string()),
    })
}

/// Parses and checks a body under the request caps `limits`; `default_domain` is
/// `CHECK_DOMAIN`.
pub(crate) fn parse(
    body: &[u8],
    default_domain: &str,
    limits: &Limits,
) -> Result<CheckRequest, CheckError> {
    let Members {
        fields: obj,
        descriptors: sent,
        unknown,
    } = members(body, limits)?;
    if let Some(unknown) = unknown {
        return Err(CheckError::field(
            &unknown,
            format!("unknown field (expected one of {})", FIELD_NAMES.join(", ")),
        ));
    }
    let client_key =
        string(&obj, CLIENT_KEY)?.ok_or_else(|| CheckError::field(CLIENT_KEY, "required"))?;
    let endpoint = string(&obj, ENDPOINT)?;
    let domain = string(&obj, "domain")?.unwrap_or_else(|| default_domain.to_owned());
    let cost = whole("cost", obj.get("cost"), MAX_COST)?.unwrap_or(1);
    let max_wait_ms = whole("max_wait_ms", obj.get("max_wait_ms"), MAX_WAIT_MS)?.unwrap_or(0);
    let details = flag(&obj, "details", "must be true or false")?;
    let report = flag(
        &obj,
        "report",
        "must be true or false (the usage goes in cost)",
    )?;
    if report && obj.get("release").is_some_and(|v| v == &Value::Bool(true)) {
        return Err(CheckError::field(
            "report",
            "a usage report cannot also release a slot (release)",
        ));
    }
    let mut descriptors = own_descriptors(&client_key, endpoint, cost, report);
    if let Some(list) = sent {
        let sent =
            descriptors_of(list).map_err(|e| CheckError::field("descriptors", e.to_string()))?;
        descriptors.extend(sent.into_iter().map(|d| Descriptor {
            hits_addend: d.hits_addend.or(Some(cost)),
            report,
            ..d
        }));
    }
    let holder = super::holder::read(&obj)?;
    super::holder::apply(&mut descriptors, &holder);
    if let Some(class) = priority(&obj)? {
        for d in &mut descriptors {
            d.priority = Some(class.clone());
        }
    }
    Ok(CheckRequest {
        holder,
        request: Request {
            domain,
            descriptors,
            hits_addend: 0,
            max_wait: Duration::from_millis(max_wait_ms),
        },
        details,
    })
}

/// The descriptors `/check` makes of its own fields: the client's key, and with `endpoint` the
/// client's key on that endpoint, each counting `cost`.
fn own_descriptors(
    client_key: &str,
    endpoint: Option<String>,
    cost: u64,
    report: bool,
) -> Vec<Descriptor> {
    let counting = |entries| Descriptor {
        entries,
        limit: None,
        hits_addend: Some(cost),
        refund: false,
        report,
        holder: None,
        priority: None,
    };
    let mut descriptors = vec![counting(vec![Entry::new(CLIENT_KEY, client_key)])];
    if let Some(endpoint) = endpoint {
        descriptors.push(counting(vec![
            Entry::new(CLIENT_KEY, client_key),
            Entry::new(ENDPOINT, endpoint),
        ]));
    }
    descriptors
}

/// A true-or-false field (`details`, `report`); false when absent or null, `why` when it is
/// something else.
fn flag(obj: &Map<String, Value>, field: &str, why: &str) -> Result<bool, CheckError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(CheckError::field(field, why)),
    }
}

/// A non-empty string field; `None` when absent or null.
fn string(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, CheckError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => {
            Err(CheckError::field(field, "must not be empty"))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(CheckError::field(field, "must be a string")),
    }
}

/// `priority`: the request's class for the limits with priorities (a class name, so at most
/// [`MAX_CLASS_NAME`] bytes); `None` when absent or null.
fn priority(obj: &Map<String, Value>) -> Result<Option<String>, CheckError> {
    let class = string(obj, "priority")?;
    if class.as_ref().is_some_and(|c| c.len() > MAX_CLASS_NAME) {
        return Err(CheckError::field(
            "priority",
            format!(
                "must be at most {MAX_CLASS_NAME} bytes (a class name of the limit's priorities)"
            ),
        ));
    }
    Ok(class)
}

/// A whole number from 0 to `max` (`cost`, `max_wait_ms`); `None` when absent or null.
fn whole(field: &str, v: Option<&Value>, max: u64) -> Result<Option<u64>, CheckError> {
    let n = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(_) => return Err(CheckError::field(field, "must be a number")),
    };
    let whole = n.as_u64().or_else(|| {
        // 2.0 is a whole number written as a float; 2.5, -1 and 1e300 are not.
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=max as f64).contains(f))
            .map(|f| f as u64)
    });
    match whole {
        Some(c) if c <= max => Ok(Some(c)),
        _ if n.as_i64().is_some_and(|i| i < 0) || n.as_f64().is_some_and(|f| f < 0.0) => {
            Err(CheckError::field(field, "must not be negative"))
        }
        _ if n.as_f64().is_some_and(|f| f.fract() != 0.0) => {
            Err(CheckError::field(field, "must be a whole number"))
        }
        _ => Err(CheckError::field(field, format!("must be at most {max}"))),
    }
}

#[cfg(test)]
mod tests;
