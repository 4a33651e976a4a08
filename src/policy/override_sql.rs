//! The override listing's and counting's SQL, written once for both backends like the
//! violation log's (`violations::sql`): [`QueryBuilder`] numbers the placeholders the way
//! each database wants, so the backends only execute what these functions build.

use std::collections::HashMap;

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::model::FieldError;
use super::rows::micros;
use super::sql_parts;
use super::violations::Cursor;
use super::violations::cursor::{page_params, unknown_params};
use ratelimitd_core::clock::Timestamp;

/// The columns every override query reads.
pub(super) const COLUMNS: &str =
    "id, domain, descriptor, requests_per_unit, unit, valid_until, reason, created_by, created_at";

/// The order of every override listing (the one `GET /v1/overrides` pages by).
const NEWEST_FIRST: &str = "created_at DESC, id DESC";

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
        unknown_params(params, &KNOWN, &mut errors);
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
    let mut b = sql_parts::select(COLUMNS, "rate_limit_overrides");
    sql_parts::and_eq(&mut b, "domain", p.domain.as_ref());
    sql_parts::and_after(&mut b, "created_at", p.after.as_ref());
    sql_parts::page(&mut b, NEWEST_FIRST, p.limit);
    b
}

/// Every override (newest first), or only those still active at `active_at`.
pub(super) fn list<'a, DB>(active_at: Option<Timestamp>) -> QueryBuilder<'a, DB>
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(format!("SELECT {COLUMNS} FROM rate_limit_overrides"));
    if let Some(now) = active_at {
        b.push(" WHERE valid_until > ").push_bind(micros(now));
    }
    b.push(format!(" ORDER BY {NEWEST_FIRST}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<OverridePage, Vec<FieldError>> {
        OverridePage::parse(&crate::policy::violations::cursor::params(pairs))
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
