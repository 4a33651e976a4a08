//! The protojson mapping of `RateLimitRequest` / `RateLimitResponse` used by `/json`
//! (`docs/design/contract.md#json-mapping`): camelCase names (`snake_case` accepted on input),
//! unknown fields rejected, 64-bit numbers as strings or numbers, enums by name or number, default
//! values omitted on output. The body is decoded under the request caps (`capped`): it
//! stops at the first descriptor or entry past its cap instead of building the whole list first.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::{Map, Value, json};

use super::capped::{Caps, Descriptors, once};
use ratelimitd_core::limiter::{Limits, OverCap};

use crate::grpc::unit::from_proto_number;
use ratelimitd_core::config::Unit;
use ratelimitd_core::limiter::fired::duration_text;
use ratelimitd_core::limiter::{Descriptor, Entry, Override, Request, Response};

/// Why a `/json` body was not a valid request.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON, or not the shape of a `RateLimitRequest`.
    #[error("invalid RateLimitRequest JSON: {0}")]
    Syntax(#[from] serde_json::Error),
    /// A number out of range or not a number.
    #[error("invalid number {0:?}")]
    Number(String),
    /// An enum name that is not a unit.
    #[error("invalid unit {0:?}")]
    Unit(String),
    /// More descriptors or entries than a cap allows; the rest of the body was not decoded.
    #[error(transparent)]
    OverCap(#[from] OverCap),
}

/// A protojson integer: JSON number or decimal string.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Num {
    N(u64),
    S(String),
}

impl Num {
    fn get(&self) -> Result<u64, JsonError> {
        match self {
            Num::N(n) => Ok(*n),
            Num::S(s) => s.parse().map_err(|_| JsonError::Number(s.clone())),
        }
    }
}

/// A protojson enum: name or number.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum EnumValue {
    N(i32),
    S(String),
}

/// A request as sent, before its numbers and units are checked.
#[derive(Default)]
struct JsonRequest {
    domain: Option<String>,
    descriptors: Option<Vec<JsonDescriptor>>,
    hits_addend: Option<Num>,
}

/// One descriptor as sent (decoded by `capped`, under the entry cap).
#[derive(Default)]
pub(super) struct JsonDescriptor {
    pub(super) entries: Option<Vec<JsonEntry>>,
    pub(super) limit: Option<JsonOverride>,
    pub(super) hits_addend: Option<Num>,
    pub(super) is_negative_hits: Option<bool>,
}

/// One descriptor entry as sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JsonEntry {
    key: Option<String>,
    value: Option<String>,
}

/// A descriptor's limit override as sent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct JsonOverride {
    #[serde(rename = "requestsPerUnit", alias = "requests_per_unit")]
    requests_per_unit: Option<Num>,
    unit: Option<EnumValue>,
}

fn u32_of(n: Option<&Num>) -> Result<u32, JsonError> {
    let v = n.map_or(Ok(0), Num::get)?;
    u32::try_from(v).map_err(|_| JsonError::Number(v.to_string()))
}

fn unit_of(u: Option<&EnumValue>) -> Result<Option<Unit>, JsonError> {
    match u {
        None => Ok(None),
        Some(EnumValue::N(n)) => Ok(from_proto_number(*n)),
        Some(EnumValue::S(s)) if s == "UNKNOWN" => Ok(None),
        Some(EnumValue::S(s)) => Unit::ALL
            .into_iter()
            .find(|u| u.as_str() == s)
            .map(Some)
            .ok_or_else(|| JsonError::Unit(s.clone())),
    }
}

/// Seed for the request object.
struct RequestSeed<'c, 'a>(&'c Caps<'a>);

impl<'de> DeserializeSeed<'de> for RequestSeed<'_, '_> {
    type Value = JsonRequest;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<JsonRequest, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_, '_> {
    type Value = JsonRequest;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a RateLimitRequest object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonRequest, A::Error> {
        let mut r = JsonRequest::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "domain" => once(&mut r.domain, "domain", map.next_value()?)?,
                "descriptors" => {
                    let list = map.next_value_seed(Descriptors(self.0))?;
                    once(&mut r.descriptors, "descriptors", list)?;
                }
                "hitsAddend" | "hits_addend" => {
                    once(&mut r.hits_addend, "hitsAddend", map.next_value()?)?;
                }
                other => {
                    const FIELDS: &[&str] = &["domain", "descriptors", "hitsAddend"];
                    return Err(de::Error::unknown_field(other, FIELDS));
                }
            }
        }
        Ok(r)
    }
}

/// Decodes `body` with `seed` under `caps`: a refusal by a cap is [`JsonError::OverCap`].
pub(super) fn decode<'de, S: DeserializeSeed<'de>>(
    body: &'de [u8],
    caps: &Caps<'_>,
    seed: S,
) -> Result<S::Value, JsonError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let r = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    r.map_err(|e| caps.hit().map_or(JsonError::Syntax(e), JsonError::OverCap))
}

/// Parses a `/json` body into a limiter request, decoding at most what `limits` accept.
pub fn parse_request(body: &[u8], limits: &Limits) -> Result<Request, JsonError> {
    let caps = Caps::new(limits);
    let r = decode(body, &caps, RequestSeed(&caps))?;
    let hits_addend = u64::from(u32_of(r.hits_addend.as_ref())?);
    Ok(Request {
        domain: r.domain.unwrap_or_default(),
        descriptors: descriptors_of(r.descriptors.unwrap_or_default())?,
        hits_addend,
        max_wait: std::time::Duration::ZERO,
    })
}

/// Checks the numbers and units of a decoded descriptor list (`/json`'s, or `POST /check`'s).
pub(super) fn descriptors_of(list: Vec<JsonDescriptor>) -> Result<Vec<Descriptor>, JsonError> {
    let mut descriptors = Vec::with_capacity(list.len());
    for d in list {
        let mut descriptor = Descriptor {
            entries: d
                .entries
                .unwrap_or_default()
                .into_iter()
                .map(|e| Entry::new(e.key.unwrap_or_default(), e.value.unwrap_or_default()))
                .collect(),
            limit: match &d.limit {
                Some(o) => Some(Override {
                    requests_per_unit: u32_of(o.requests_per_unit.as_ref())?,
                    unit: unit_of(o.unit.as_ref())?,
                }),
                None => None,
            },
            hits_addend: d.hits_addend.as_ref().map(Num::get).transpose()?,
            refund: d.is_negative_hits.unwrap_or(false),
            report: false,
            holder: None,
            priority: None,
        };
        // As over gRPC: a `ratelimitd.holder` entry names a concurrency slot's holder.
        descriptor.split_holder();
        descriptor.split_report();
        descriptors.push(descriptor);
    }
    Ok(descriptors)
}

/// Renders a response as protojson, omitting fields that hold their default value.
pub(crate) fn render_response(r: &Response) -> Value {
    let mut out = Map::new();
    out.insert("overallCode".into(), json!(r.overall_code.as_str()));
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .map(|s| {
            let mut m = Map::new();
            m.insert("code".into(), json!(s.code.as_str()));
            if let Some(l) = &s.current_limit {
                let mut lim = Map::new();
                if !l.name.is_empty() {
                    lim.insert("name".into(), json!(l.name));
                }
                if l.requests_per_unit != 0 {
                    lim.insert("requestsPerUnit".into(), json!(l.requests_per_unit));
                }
                lim.insert("unit".into(), json!(l.unit.as_str()));
                m.insert("currentLimit".into(), Value::Object(lim));
            }
            if s.limit_remaining != 0 {
                m.insert("limitRemaining".into(), json!(s.limit_remaining));
            }
            if let Some(d) = s.duration_until_reset {
                m.insert("durationUntilReset".into(), json!(duration_text(d)));
            }
            Value::Object(m)
        })
        .collect();
    if !statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(statuses));
    }
    if !r.response_headers.is_empty() {
        let headers = r
            .response_headers
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        out.insert("responseHeadersToAdd".into(), Value::Array(headers));
    }
    if let Some(md) = &r.dynamic_metadata {
        out.insert("dynamicMetadata".into(), Value::Object(md.clone()));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Limits {
        Limits::default()
    }

    #[test]
    fn parses_camel_and_snake_case_and_normalises_hits() {
        let r = parse_request(br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],"hits_addend":"0"}],"hitsAddend":0}"#, &caps()).unwrap();
        assert_eq!(r.domain, "d");
        assert_eq!(
            r.hits_addend, 0,
            "carried as sent; the limiter reads 0 as 1"
        );
        assert_eq!(r.descriptors[0].hits_addend, Some(0));
        assert_eq!(r.descriptors[0].entries[0], Entry::new("k", "v"));
    }

    #[test]
    fn parses_overrides_by_name_or_number() {
        let r = parse_request(br#"{"domain":"d","descriptors":[{"limit":{"requestsPerUnit":10,"unit":"DAY"}},{"limit":{"requests_per_unit":"3","unit":2}}]}"#, &caps()).unwrap();
        assert_eq!(
            r.descriptors[0].limit,
            Some(Override {
                requests_per_unit: 10,
                unit: Some(Unit::Day)
            })
        );
        assert_eq!(
            r.descriptors[1].limit,
            Some(Override {
                requests_per_unit: 3,
                unit: Some(Unit::Minute)
            })
        );
    }

    #[test]
    fn rejects_unknown_fields_bad_numbers_and_bad_units() {
        assert!(parse_request(br#"{"domain":"x","bogus":1}"#, &caps()).is_err());
        assert!(parse_request(b"}", &caps()).is_err());
        assert!(parse_request(b"", &caps()).is_err());
        assert!(parse_request(br#"{"hitsAddend":"x"}"#, &caps()).is_err());
        assert!(parse_request(br#"{"hitsAddend":4294967296}"#, &caps()).is_err());
        assert!(
            parse_request(
                br#"{"descriptors":[{"limit":{"unit":"FORTNIGHT"}}]}"#,
                &caps()
            )
            .is_err()
        );
    }

    #[test]
    fn decoding_stops_at_the_descriptor_and_entry_caps() {
        let limits = Limits {
            max_descriptors: 2,
            max_entries: 1,
            ..Limits::default()
        };
        // Truncated after the cap: the decoder never reaches the end of the list.
        let many = format!(
            r#"{{"domain":"d","descriptors":[{}"#,
            ["{}"; 100_000].join(",")
        );
        let e = parse_request(many.as_bytes(), &limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "request has more than 2 descriptors; at most 2 are accepted (MAX_DESCRIPTORS_PER_REQUEST)"
        );
        let entry = r#"{"key":"k","value":"v"}"#;
        let wide =
            format!(r#"{{"domain":"d","descriptors":[{{}},{{"entries":[{entry},{entry}]}}]}}"#);
        let e = parse_request(wide.as_bytes(), &limits).unwrap_err();
        assert!(matches!(
            e,
            JsonError::OverCap(OverCap::Entries {
                descriptor: 1,
                max: 1
            })
        ));
        let at_caps = format!(r#"{{"domain":"d","descriptors":[{{}},{{"entries":[{entry}]}}]}}"#);
        assert_eq!(
            parse_request(at_caps.as_bytes(), &limits)
                .unwrap()
                .descriptors
                .len(),
            2
        );
        // Members given twice are refused, as before.
        assert!(parse_request(br#"{"domain":"a","domain":"b"}"#, &limits).is_err());
    }
}
