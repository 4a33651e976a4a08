//! The violation log's SQL, written once for both backends: [`QueryBuilder`] numbers the
//! placeholders the way each database wants (`?` for SQLite, `$1…` for PostgreSQL), so the
//! backends only execute what these functions build.

use sqlx::{ColumnIndex, Database, Decode, Encode, QueryBuilder, Row, Type};

use super::{StoredViolation, Violation, ViolationQuery};
use crate::policy::model::PathEntry;
use crate::policy::rows::micros;
use crate::policy::sql_parts;
use crate::policy::store::StoreError;
use ratelimitd_core::clock::Timestamp;

const COLUMNS: &str = "id, domain, descriptor, client_key, at, request_count, limit_value, \
     limit_name, unit, hits, usage, source, shadow, instance, requests, last_at, class, soft";

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// One multi-row `INSERT` of `batch`.
pub(in crate::policy) fn insert<'a, DB>(batch: &'a [StoredViolation]) -> QueryBuilder<'a, DB>
where
    DB: Database,
    String: Encode<'a, DB> + Type<DB>,
    &'a str: Encode<'a, DB> + Type<DB>,
    Option<&'a str>: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    Option<i64>: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
{
    let mut q = QueryBuilder::new(format!("INSERT INTO rate_limit_violations ({COLUMNS}) "));
    q.push_values(batch, |mut row, s| {
        let v = &s.violation;
        row.push_bind(s.id.as_str())
            .push_bind(v.domain.as_str())
            .push_bind(serde_json::to_string(&v.descriptor).unwrap_or_default())
            .push_bind(v.client_key.as_deref())
            .push_bind(micros(v.at))
            .push_bind(int(v.usage.unwrap_or(v.hits)))
            .push_bind(i64::from(v.requests_per_unit))
            .push_bind(v.limit_name.as_str())
            .push_bind(v.unit.as_ref())
            .push_bind(int(v.hits))
            .push_bind(v.usage.map(int))
            .push_bind(v.source.as_ref())
            .push_bind(v.shadow)
            .push_bind(&*v.instance)
            .push_bind(int(v.requests))
            .push_bind(micros(v.last_at))
            .push_bind(v.class.as_deref())
            .push_bind(v.soft);
    });
    q
}

/// The `SELECT` of `q`: its filters, newest first, one row more than a page.
pub(in crate::policy) fn select<'a, DB>(q: &'a ViolationQuery) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = sql_parts::select(COLUMNS, "rate_limit_violations");
    sql_parts::and_eq(&mut b, "domain", q.domain.as_ref());
    sql_parts::and_eq(&mut b, "client_key", q.client_key.as_ref());
    if let Some(t) = q.since {
        b.push(" AND at >= ").push_bind(micros(t));
    }
    if let Some(t) = q.until {
        b.push(" AND at < ").push_bind(micros(t));
    }
    sql_parts::and_after(&mut b, "at", q.after.as_ref());
    sql_parts::page(&mut b, "at DESC, id DESC", q.limit);
    b
}

/// A row of [`select`].
pub(in crate::policy) fn read<R>(row: &R) -> Result<StoredViolation, StoreError>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("id")?;
    let descriptor: String = row.try_get("descriptor")?;
    let descriptor: Vec<PathEntry> =
        serde_json::from_str(&descriptor).map_err(|e| StoreError::BadRow {
            id: id.clone(),
            why: format!("descriptor: {e}"),
        })?;
    let uint = |v: i64| u64::try_from(v).unwrap_or(0);
    let usage: Option<i64> = row.try_get("usage")?;
    let rpu: i64 = row.try_get("limit_value")?;
    let instance: String = row.try_get("instance")?;
    let at = ratelimitd_core::clock::Timestamp::from_micros(uint(row.try_get("at")?));
    // Rows written before aggregation cover one request at `at`.
    let last_at: Option<i64> = row.try_get("last_at")?;
    Ok(StoredViolation {
        violation: Violation {
            domain: row.try_get("domain")?,
            descriptor,
            client_key: row.try_get("client_key")?,
            limit_name: row.try_get("limit_name")?,
            requests_per_unit: u32::try_from(rpu).unwrap_or(u32::MAX),
            unit: row.try_get::<String, _>("unit")?.into(),
            hits: uint(row.try_get("hits")?),
            usage: usage.map(uint),
            source: row.try_get::<String, _>("source")?.into(),
            shadow: row.try_get("shadow")?,
            class: row.try_get("class")?,
            soft: row.try_get("soft")?,
            requests: uint(row.try_get("requests")?),
            at,
            last_at: last_at.map_or(at, |t| Timestamp::from_micros(uint(t))),
            instance: instance.into(),
        },
        id,
    })
}
