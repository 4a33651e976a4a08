//! The override listing's, counting's and purging's SQL, written once for both backends like the
//! violation log's (`violations::sql`): [`QueryBuilder`] numbers the placeholders the way
//! each database wants, so the backends only execute what these functions build.

use std::collections::HashMap;

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::model::FieldError;
use super::rows::micros;
use super::violations::Cursor;
use super::violations::cursor::page_params;
use ratelimitd_core::clock::Timestamp;

/// The columns every override query reads.
pub(super) const COLUMNS: &str =
    "id, domain, descriptor, requests_per_unit, unit, valid_until, reason, created_by, created_at";

/// One page of `GET /v1/overrides`: newest first by (`created_at`, id).
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct OverridePage {
    /// Only this domain.
    pub domain: Option<String>,
    /// Overrides per page (1 to [`super::violations::cursor::MAX_LIMIT`]).
    pub limit: u32,
    /// Only overrides after this position (the previous page's `next_cursor`).
    pub after: Option<Cursor>,
}

const KNOWN: [&str; 3] = ["domain", "limit", "cursor"];

impl OverridePage {
    /// Reads the query string's parameters; every unknown or invalid one is an error.
    pub(crate) fn parse(params: &HashMap<String, String>) -> Result<OverridePage, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut unknown: Vec<&String> = params
            .keys()
            .filter(|k| !KNOWN.contains(&k.as_str()))
            .collect();
        unknown.sort();
        for k in unknown {
            let msg = format!("unknown parameter (known: {})", KNOWN.join(", "));
            errors.push(FieldError::new(k.as_str(), msg));
        }
        let (limit, after) = page_params(params, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        let domain = params.get("domain").filter(|d| !d.is_empty()).cloned();
        Ok(OverridePage {
            domain,
            limit,
            after,
        })
    }

    /// The cursor of the page after `rows` (read with one row more than a page), and `rows`
    /// cut to the page.
    pub(crate) fn next_cursor<T>(
        &self,
        rows: &mut Vec<T>,
        at_id: impl Fn(&T) -> Cursor,
    ) -> Option<String> {
        let more = rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        rows.last().filter(|_| more).map(|r| at_id(r).encode())
    }
}

/// The `SELECT` of one page, one row more than the page.
pub(super) fn page<'a, DB>(p: &'a OverridePage) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(format!(
        "SELECT {COLUMNS} FROM rate_limit_overrides WHERE 1 = 1"
    ));
    if let Some(d) = &p.domain {
        b.push(" AND domain = ").push_bind(d.as_str());
    }
    if let Some(c) = &p.after {
        b.push(" AND (created_at < ").push_bind(micros(c.at));
        b.push(" OR (created_at = ").push_bind(micros(c.at));
        b.push(" AND id < ").push_bind(c.id.as_str()).push("))");
    }
    b.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(p.limit) + 1);
    b
}

/// `COUNT(*)` of the overrides active at `now`.
pub(super) fn count_active<'a, DB>(now: Timestamp) -> QueryBuilder<'a, DB>
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new("SELECT COUNT(*) FROM rate_limit_overrides WHERE valid_until > ");
    b.push_bind(micros(now));
    b
}

/// Deletes at most `batch` overrides that expired before `before` (a bounded statement,
/// repeated by the purge task).
pub(super) fn delete_expired<'a, DB>(before: Timestamp, batch: u32) -> QueryBuilder<'a, DB>
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(
        "DELETE FROM rate_limit_overrides WHERE id IN \
         (SELECT id FROM rate_limit_overrides WHERE valid_until < ",
    );
    b.push_bind(micros(before))
        .push(" LIMIT ")
        .push_bind(i64::from(batch))
        .push(")");
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<OverridePage, Vec<FieldError>> {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        OverridePage::parse(&map)
    }

    #[test]
    fn paging_parameters_default_and_refuse_what_they_do_not_know() {
        let p = parse(&[]).unwrap();
        assert_eq!((p.limit, p.domain, p.after), (100, None, None));
        assert_eq!(
            parse(&[("domain", "api"), ("limit", "1000")])
                .unwrap()
                .limit,
            1000
        );
        let errors = parse(&[("limit", "0"), ("cursor", "zz"), ("sort", "id")]).unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["sort", "limit", "cursor"]);
    }
}
