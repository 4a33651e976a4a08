//! The opaque cursor of `GET /v1/violations`: the position (time, id) of the last record of a
//! page, hex-encoded so that clients treat it as a token. The next page starts strictly after it
//! in newest-first order, so pages neither repeat nor skip records written meanwhile behind it.
//! `GET /v1/overrides` pages the same way, on (creation time, id).

use std::collections::HashMap;

use crate::policy::model::FieldError;
use ratelimitd_core::clock::Timestamp;

/// Records per page unless `limit` says otherwise.
pub(crate) const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` accepted: a page stays a bounded read.
pub(crate) const MAX_LIMIT: u32 = 1000;

/// The paging parameters of a listing, `limit` (1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`])
/// and `cursor` (a previous page's `next_cursor`); each invalid one is added to `errors`.
pub(crate) fn page_params(
    params: &HashMap<String, String>,
    errors: &mut Vec<FieldError>,
) -> (u32, Option<Cursor>) {
    let limit = match params.get("limit") {
        None => DEFAULT_LIMIT,
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                let msg = format!("'{v}' is not a whole number from 1 to {MAX_LIMIT}");
                errors.push(FieldError::new("limit", msg));
                DEFAULT_LIMIT
            }
        },
    };
    let after = params
        .get("cursor")
        .filter(|c| !c.is_empty())
        .and_then(|c| {
            let parsed = Cursor::decode(c);
            if parsed.is_none() {
                let msg = "not a cursor returned as next_cursor by this endpoint";
                errors.push(FieldError::new("cursor", msg));
            }
            parsed
        });
    (limit, after)
}

/// Adds an error for every parameter not in `known`, in name order (a misspelt filter would
/// otherwise be ignored silently and list more than asked for).
pub(crate) fn unknown_params(
    params: &HashMap<String, String>,
    known: &[&str],
    errors: &mut Vec<FieldError>,
) {
    let mut unknown: Vec<&String> = params
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .collect();
    unknown.sort();
    for k in unknown {
        let msg = format!("unknown parameter (known: {})", known.join(", "));
        errors.push(FieldError::new(k.as_str(), msg));
    }
}

/// The query string `pairs` as the listings' parsers take it.
#[cfg(test)]
pub(crate) fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Where a page ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last record's time.
    pub at: Timestamp,
    /// The last record's id.
    pub id: String,
}

impl Cursor {
    /// The token clients pass back as `cursor`.
    pub fn encode(&self) -> String {
        let plain = format!("{}:{}", self.at.as_micros(), self.id);
        plain.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads a token made by [`Cursor::encode`]; `None` when it is not one.
    pub fn decode(token: &str) -> Option<Cursor> {
        if !token.len().is_multiple_of(2) || token.len() > 256 {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect();
        let plain = String::from_utf8(bytes?).ok()?;
        let (at, id) = plain.split_once(':')?;
        let valid_id = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        valid_id.then_some(())?;
        Some(Cursor {
            at: Timestamp::from_micros(at.parse().ok()?),
            id: id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_refused() {
        let c = Cursor {
            at: Timestamp::from_micros(1_234_000_567),
            id: "vi_00ff00ff00ff00ff".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        for bad in ["", "zz", "abc", "3132", "313a", "3a7669"] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }
}
