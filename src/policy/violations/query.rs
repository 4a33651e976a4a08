//! `GET /v1/violations` parameters: checked all at once (every problem is reported, as 422), and
//! turned into the filters the backends' one query text (`sql`) applies.

use std::collections::HashMap;

use super::cursor::{Cursor, page_params, unknown_params};
use crate::policy::input::parse_rfc3339;
use crate::policy::model::FieldError;
use ratelimitd_core::clock::Timestamp;

/// Which violations to read, newest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ViolationQuery {
    /// Only this domain.
    pub domain: Option<String>,
    /// Only descriptors whose `client_key` entry has this value.
    pub client_key: Option<String>,
    /// Only records at or after this time.
    pub since: Option<Timestamp>,
    /// Only records before this time.
    pub until: Option<Timestamp>,
    /// Records per page (1 to `MAX_LIMIT`).
    pub limit: u32,
    /// Only records after this position (the previous page's `next_cursor`).
    pub after: Option<Cursor>,
}

const KNOWN: [&str; 6] = ["domain", "client_key", "since", "until", "limit", "cursor"];

impl ViolationQuery {
    /// Reads the query string's parameters; every unknown or invalid one is an error.
    pub fn parse(params: &HashMap<String, String>) -> Result<ViolationQuery, Vec<FieldError>> {
        let mut errors = Vec::new();
        unknown_params(params, &KNOWN, &mut errors);
        let text = |k: &str| params.get(k).filter(|v| !v.is_empty()).cloned();
        let mut time = |k: &str| {
            let v = text(k)?;
            let t = parse_rfc3339(&v);
            if t.is_none() {
                let msg = format!("'{v}' is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)");
                errors.push(FieldError::new(k, msg));
            }
            t
        };
        let (since, until) = (time("since"), time("until"));
        let (limit, after) = page_params(params, &mut errors);
        if let (Some(s), Some(u)) = (since, until)
            && s >= u
        {
            errors.push(FieldError::new("until", "must be after since"));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(ViolationQuery {
            domain: text("domain"),
            client_key: text("client_key"),
            since,
            until,
            limit,
            after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::violations::cursor::DEFAULT_LIMIT;

    fn parse(pairs: &[(&str, &str)]) -> Result<ViolationQuery, Vec<FieldError>> {
        ViolationQuery::parse(&crate::policy::violations::cursor::params(pairs))
    }

    #[test]
    fn defaults_filters_and_every_error_at_once() {
        let q = parse(&[]).unwrap();
        assert_eq!((q.limit, q.domain, q.after), (DEFAULT_LIMIT, None, None));
        let q = parse(&[
            ("domain", "api"),
            ("since", "1970-01-01T00:20:00Z"),
            ("limit", "1000"),
        ])
        .unwrap();
        assert_eq!(q.domain.as_deref(), Some("api"));
        assert_eq!(q.since, Some(Timestamp::from_secs(1200)));
        let errors = parse(&[
            ("limit", "1001"),
            ("since", "yesterday"),
            ("cursor", "zz"),
            ("colour", "red"),
        ])
        .unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["colour", "since", "limit", "cursor"]);
        let e = parse(&[
            ("since", "1970-01-01T00:20:00Z"),
            ("until", "1970-01-01T00:10:00Z"),
        ]);
        assert_eq!(e.unwrap_err()[0].field, "until");
    }
}
