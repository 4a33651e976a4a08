//! API input checked field by field: every problem is collected (never only the first) with its
//! JSON path, using the YAML validator's texts where the YAML has the same field.

use serde_json::{Map, Value};

use super::model::{FieldError, NewOverride, PathEntry};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::Unit;

/// Longest `reason` accepted, in bytes.
const MAX_REASON: usize = 1024;
/// Most entries in one descriptor path.
const MAX_ENTRIES: usize = 32;

/// Checks a `POST /v1/overrides` body; `now` is the service clock (`valid_until` must be later,
/// `valid_for` counts from it: `super::expiry`).
pub fn parse_override(body: &[u8], now: Timestamp) -> Result<NewOverride, Vec<FieldError>> {
    let mut errors = Vec::new();
    const KNOWN: [&str; 7] = [
        "domain",
        "descriptor",
        "requests_per_unit",
        "unit",
        "valid_until",
        "valid_for",
        "reason",
    ];
    let obj = object(body, &KNOWN, &mut errors)?;
    let domain = domain(&obj, &mut errors);
    let descriptor = descriptor(obj.get("descriptor"), &mut errors);
    let requests_per_unit = requests_per_unit(&obj, &mut errors);
    let unit = string(&obj, "unit", &mut errors).and_then(|text| {
        let unit = Unit::parse(&text);
        if unit.is_none() {
            let msg = format!("invalid rate limit unit '{text}'");
            errors.push(FieldError::new("unit", msg));
        }
        unit
    });
    let valid_until = super::expiry::parse(&obj, now, &mut errors);
    let reason = reason(&obj, &mut errors);
    match (
        domain,
        descriptor,
        requests_per_unit,
        unit,
        valid_until,
        reason,
    ) {
        (Some(domain), Some(descriptor), Some(requests_per_unit), Some(unit), Some(t), Some(r))
            if errors.is_empty() =>
        {
            Ok(NewOverride {
                domain,
                descriptor,
                requests_per_unit,
                unit,
                valid_until: t,
                reason: r,
            })
        }
        _ => Err(errors),
    }
}

/// A body that must be a JSON object: the object, with an error in `errors` for each member
/// not in `known`; the whole body's error when it is not an object.
pub(crate) fn object(
    body: &[u8],
    known: &[&str],
    errors: &mut Vec<FieldError>,
) -> Result<Map<String, Value>, Vec<FieldError>> {
    let obj = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(vec![FieldError::new("", "expected a JSON object")]),
        Err(e) => return Err(vec![FieldError::new("", format!("invalid JSON: {e}"))]),
    };
    for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        errors.push(FieldError::new(
            key,
            format!("config error, unknown key '{key}'"),
        ));
    }
    Ok(obj)
}

/// `domain`: a non-empty string, as in a configuration file.
pub(crate) fn domain(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    match string(obj, "domain", errors) {
        Some(d) if d.is_empty() => {
            errors.push(FieldError::new(
                "domain",
                "config file cannot have empty domain",
            ));
            None
        }
        d => d,
    }
}

/// An override's `requests_per_unit`: required, from 0 to `u32::MAX`.
fn requests_per_unit(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<u32> {
    let Some(v) = obj.get("requests_per_unit") else {
        return missing("requests_per_unit", errors);
    };
    let n = v.as_u64().and_then(|n| u32::try_from(n).ok());
    if n.is_none() {
        let msg = format!("expected an integer from 0 to {}, got {v}", u32::MAX);
        errors.push(FieldError::new("requests_per_unit", msg));
    }
    n
}

/// An override's `reason`: empty when absent, at most [`MAX_REASON`] bytes.
fn reason(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    if obj.get("reason").is_none() {
        return Some(String::new());
    }
    string(obj, "reason", errors).filter(|r| {
        let ok = r.len() <= MAX_REASON;
        if !ok {
            let msg = format!("is {} bytes; at most {MAX_REASON} are accepted", r.len());
            errors.push(FieldError::new("reason", msg));
        }
        ok
    })
}

/// A descriptor path: a non-empty array of `{"key", "value"}` objects with non-empty keys.
pub(crate) fn descriptor(
    v: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Vec<PathEntry>> {
    let items = match v {
        None => return missing("descriptor", errors),
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_ENTRIES => a,
        Some(_) => {
            let msg =
                format!("expected an array of 1 to {MAX_ENTRIES} {{\"key\", \"value\"}} entries");
            errors.push(FieldError::new("descriptor", msg));
            return None;
        }
    };
    let before = errors.len();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("descriptor[{i}]");
        let Value::Object(o) = item else {
            errors.push(FieldError::new(
                path,
                "expected a {\"key\", \"value\"} object",
            ));
            continue;
        };
        for k in o.keys().filter(|k| *k != "key" && *k != "value") {
            let msg = format!("config error, unknown key '{k}'");
            errors.push(FieldError::new(format!("{path}.{k}"), msg));
        }
        let key = match o.get("key") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => {
                errors.push(FieldError::new(
                    format!("{path}.key"),
                    "descriptor has empty key",
                ));
                continue;
            }
        };
        let value = match o.get("value") {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                errors.push(FieldError::new(
                    format!("{path}.value"),
                    "expected a string",
                ));
                continue;
            }
        };
        out.push(PathEntry { key, value });
    }
    (errors.len() == before).then_some(out)
}

pub(crate) fn string(
    obj: &Map<String, Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    match obj.get(field) {
        None => missing(field, errors),
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(FieldError::new(field, "expected a string"));
            None
        }
    }
}

fn missing<T>(field: &str, errors: &mut Vec<FieldError>) -> Option<T> {
    errors.push(FieldError::new(field, "is required"));
    None
}

/// An RFC 3339 time (any offset) as a timestamp; `None` when malformed or before 1970.
pub(crate) fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    let micros = t.unix_timestamp_nanos() / 1_000;
    u64::try_from(micros).ok().map(Timestamp::from_micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_secs(1_700_000_000)
    }

    #[test]
    fn a_valid_body_is_accepted() {
        let body = br#"{"domain":"api","descriptor":[{"key":"client_key","value":"user:42"}],
            "requests_per_unit":1000,"unit":"minute","valid_until":"2026-12-01T00:00:00Z",
            "reason":"launch week"}"#;
        let o = parse_override(body, now()).unwrap();
        assert_eq!(o.unit, Unit::Minute);
        assert_eq!(o.valid_until.to_rfc3339(), "2026-12-01T00:00:00.000000Z");
        assert_eq!(o.descriptor[0].value, "user:42");
    }

    #[test]
    fn every_invalid_field_is_reported() {
        let body = br#"{"domain":"","descriptor":[{"key":""},{"value":3,"key":"k","x":1}],
            "requests_per_unit":-1,"unit":"fortnight","valid_until":"2001-01-01T00:00:00Z",
            "reason":7,"extra":true}"#;
        let errors = parse_override(body, now()).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "extra",
                "domain",
                "descriptor[0].key",
                "descriptor[1].x",
                "descriptor[1].value",
                "requests_per_unit",
                "unit",
                "valid_until",
                "reason"
            ]
        );
        assert_eq!(errors[6].message, "invalid rate limit unit 'fortnight'");
        assert_eq!(errors[2].message, "descriptor has empty key");
    }

    #[test]
    fn missing_fields_and_bad_json() {
        let errors = parse_override(b"{}", now()).unwrap_err();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors.iter().all(|e| e.message.starts_with("is required")));
        let bad = parse_override(b"{", now()).unwrap_err();
        assert!(bad[0].message.starts_with("invalid JSON"));
    }
}
