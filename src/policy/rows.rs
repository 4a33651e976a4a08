//! Reading rows back, for both backends: the schema uses only TEXT, BIGINT and BOOLEAN, which
//! SQLite and PostgreSQL decode to the same Rust types.

use sqlx::{ColumnIndex, Decode, Row, Type};

use super::model::{NewOverride, PathEntry, StoredOverride};
use super::rules::Rule;
use super::store::StoreError;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::Unit;

/// Times are stored as microseconds since the epoch (the service clock's resolution).
pub(super) fn micros(t: Timestamp) -> i64 {
    i64::try_from(t.as_micros()).unwrap_or(i64::MAX)
}

/// A row of `rate_limit_overrides`.
pub(super) fn read_override<R>(row: &R) -> Result<StoredOverride, StoreError>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("id")?;
    let bad = |why: String| StoreError::BadRow {
        id: id.clone(),
        why,
    };
    let descriptor: String = row.try_get("descriptor")?;
    let descriptor: Vec<PathEntry> =
        serde_json::from_str(&descriptor).map_err(|e| bad(format!("descriptor: {e}")))?;
    let unit: String = row.try_get("unit")?;
    let unit =
        Unit::parse(&unit).ok_or_else(|| bad(format!("invalid rate limit unit '{unit}'")))?;
    let rpu: i64 = row.try_get("requests_per_unit")?;
    let requests_per_unit =
        u32::try_from(rpu).map_err(|_| bad(format!("requests_per_unit {rpu} out of range")))?;
    let time = |col: &str| -> Result<Timestamp, StoreError> {
        let v: i64 = row.try_get(col)?;
        Ok(Timestamp::from_micros(u64::try_from(v).unwrap_or(0)))
    };
    Ok(StoredOverride {
        spec: NewOverride {
            domain: row.try_get("domain")?,
            descriptor,
            requests_per_unit,
            unit,
            valid_until: time("valid_until")?,
            reason: row.try_get("reason")?,
        },
        created_by: row.try_get("created_by")?,
        created_at: time("created_at")?,
        id,
    })
}

/// A row of `rate_limit_rules` (id, domain, descriptor, `rate_limit`, enabled).
pub(super) fn read_rule<R>(row: &R) -> Result<Rule, StoreError>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = row.try_get("id")?;
    let bad = |why: String| StoreError::BadRow {
        id: id.clone(),
        why,
    };
    let descriptor: String = row.try_get("descriptor")?;
    let rate_limit: String = row.try_get("rate_limit")?;
    Ok(Rule {
        domain: row.try_get("domain")?,
        descriptor: serde_json::from_str(&descriptor)
            .map_err(|e| bad(format!("descriptor: {e}")))?,
        rate_limit: serde_json::from_str(&rate_limit)
            .map_err(|e| bad(format!("rate_limit: {e}")))?,
        enabled: row.try_get("enabled")?,
        id,
    })
}
