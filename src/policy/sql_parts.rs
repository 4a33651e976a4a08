//! The SQL the history's, the overrides' and the violation log's statements share, built once so
//! that they page and purge the same way: a listing is `WHERE 1 = 1` (each optional filter is
//! one more ` AND …`), the keyset position after a cursor, and a newest-first page of one row
//! more than asked for (the extra row says whether there is a next page); a purge deletes a
//! bounded batch of the oldest rows. Table and column names are `'static`: constants of the
//! callers, never input.

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::rows::micros;
use super::violations::Cursor;
use ratelimitd_core::clock::Timestamp;

/// `SELECT columns FROM table WHERE 1 = 1`, to append filters to.
pub(super) fn select<'a, DB: Database>(
    columns: &'static str,
    table: &'static str,
) -> QueryBuilder<'a, DB> {
    QueryBuilder::new(format!("SELECT {columns} FROM {table} WHERE 1 = 1"))
}

/// ` AND column = value` when there is a value.
pub(super) fn and_eq<'a, DB>(
    b: &mut QueryBuilder<'a, DB>,
    column: &'static str,
    value: Option<&'a String>,
) where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    if let Some(v) = value {
        b.push(format!(" AND {column} = ")).push_bind(v.as_str());
    }
}

/// Only rows strictly after `after` in newest-first order of (`at`, id): older, or as old with a
/// smaller id, so that pages neither repeat nor skip rows.
pub(super) fn and_after<'a, DB>(
    b: &mut QueryBuilder<'a, DB>,
    at: &'static str,
    after: Option<&'a Cursor>,
) where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    if let Some(c) = after {
        b.push(format!(" AND ({at} < ")).push_bind(micros(c.at));
        b.push(format!(" OR ({at} = ")).push_bind(micros(c.at));
        b.push(" AND id < ").push_bind(c.id.as_str()).push("))");
    }
}

/// ` ORDER BY order LIMIT limit + 1`.
pub(super) fn page<'a, DB>(b: &mut QueryBuilder<'a, DB>, order: &'static str, limit: u32)
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
{
    b.push(format!(" ORDER BY {order} LIMIT "))
        .push_bind(i64::from(limit) + 1);
}

/// Deletes at most `batch` rows of `table` whose `column` is before `before`: a bounded
/// statement, which `purge` repeats while the batches come back full.
pub(super) fn delete_before<'a, DB>(
    table: &'static str,
    column: &'static str,
    before: Timestamp,
    batch: u32,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(format!(
        "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {column} < "
    ));
    b.push_bind(micros(before))
        .push(" LIMIT ")
        .push_bind(i64::from(batch))
        .push(")");
    b
}
