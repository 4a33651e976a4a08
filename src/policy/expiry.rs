//! When a new override ends: an absolute `valid_until` (RFC 3339) or a relative `valid_for`
//! (`"30m"`, `"24h"`, `"7d"`, combined as `"1d12h"`), counted from the service clock when the
//! override is created. Exactly one of the two is given; each mistake is reported with the forms
//! that are accepted.

use std::time::Duration;

use serde_json::{Map, Value};

use super::input::{parse_rfc3339, string};
use super::model::FieldError;
use ratelimitd_core::clock::Timestamp;

/// The longest `valid_for` accepted: ten years (longer is a typo, or should be a rule).
pub(crate) const MAX_VALID_FOR: Duration = Duration::from_secs(3650 * 86_400);

/// What a bad `valid_for` is told.
const FORMS: &str = "expected a whole number followed by s, m, h or d, such as 30m, 24h or 7d \
                     (parts may be combined, as in 1d12h)";

/// The end of the override described by `obj` (`valid_until` or `valid_for`) at `now`; every
/// problem goes to `errors`.
pub(super) fn parse(
    obj: &Map<String, Value>,
    now: Timestamp,
    errors: &mut Vec<FieldError>,
) -> Option<Timestamp> {
    match (obj.get("valid_until"), obj.get("valid_for")) {
        (Some(_), Some(_)) => {
            let msg = "give either valid_until (an RFC 3339 time) or valid_for (a duration such as 24h), not both";
            errors.push(FieldError::new("valid_for", msg));
            None
        }
        (None, None) => {
            let msg = "is required, or valid_for (a duration such as 24h) instead";
            errors.push(FieldError::new("valid_until", msg));
            None
        }
        (None, Some(_)) => {
            let text = string(obj, "valid_for", errors)?;
            match valid_for(&text) {
                Ok(d) => Some(now.saturating_add(d)),
                Err(msg) => {
                    errors.push(FieldError::new("valid_for", msg));
                    None
                }
            }
        }
        (Some(_), None) => {
            let text = string(obj, "valid_until", errors)?;
            match parse_rfc3339(&text) {
                Some(t) if t > now => Some(t),
                Some(_) => {
                    let msg = format!("'{text}' is not in the future (now {})", now.to_rfc3339());
                    errors.push(FieldError::new("valid_until", msg));
                    None
                }
                None => {
                    let msg =
                        format!("'{text}' is not an RFC 3339 time such as 2026-12-01T00:00:00Z");
                    errors.push(FieldError::new("valid_until", msg));
                    None
                }
            }
        }
    }
}

/// Parses a `valid_for` duration: one or more `<whole number><s|m|h|d>` parts, above zero and at
/// most [`MAX_VALID_FOR`].
pub(crate) fn valid_for(text: &str) -> Result<Duration, String> {
    let bad = || format!("'{text}' is not a duration: {FORMS}");
    if text.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        let unit = match rest.as_bytes()[digits] {
            b's' => 1,
            b'm' => 60,
            b'h' => 3600,
            b'd' => 86_400,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .filter(|&s| s <= MAX_VALID_FOR.as_secs())
            .ok_or_else(|| format!("'{text}' is longer than the most accepted, 3650d"))?;
        rest = &rest[digits + 1..];
    }
    if total == 0 {
        return Err(format!(
            "'{text}' is zero: an override must last at least 1s"
        ));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(valid_for("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(valid_for("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(valid_for("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(valid_for("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(valid_for("1d12h"), Ok(Duration::from_secs(129_600)));
        assert_eq!(valid_for("3650d"), Ok(MAX_VALID_FOR));
    }

    #[test]
    fn refused_forms_name_the_valid_ones() {
        for bad in [
            "", "24", "h", "1.5h", "-1h", "24 h", "1w", "24H", "1h30", "+1h",
        ] {
            let e = valid_for(bad).unwrap_err();
            assert!(e.contains("30m, 24h or 7d"), "{bad}: {e}");
        }
        assert!(valid_for("0h").unwrap_err().contains("is zero"));
        assert!(valid_for("3651d").unwrap_err().contains("3650d"));
        assert!(valid_for("99999999999999999999d").is_err());
    }

    fn obj(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn valid_for_counts_from_now_and_excludes_valid_until() {
        let now = Timestamp::from_secs(1_000);
        let mut errors = Vec::new();
        let end = parse(&obj(r#"{"valid_for":"1h"}"#), now, &mut errors);
        assert_eq!(end, Some(Timestamp::from_secs(4_600)));
        assert!(errors.is_empty());
        let both = r#"{"valid_for":"1h","valid_until":"2030-01-01T00:00:00Z"}"#;
        assert_eq!(parse(&obj(both), now, &mut errors), None);
        assert_eq!(errors[0].field, "valid_for");
        assert!(errors[0].message.contains("not both"));
        errors.clear();
        assert_eq!(parse(&obj("{}"), now, &mut errors), None);
        assert_eq!(errors[0].field, "valid_until");
        assert!(errors[0].message.starts_with("is required"));
    }
}
