//! The history's SQL, and the rule and override statements a recorded change runs in the same
//! transaction, written once for both backends (as `override_sql`): [`QueryBuilder`] numbers
//! the placeholders the way each database wants.
//!
//! A row's `seq` and `version` are computed by the `INSERT` itself (one more than the largest so
//! far); writers are serialised — by the policy's write lock and SQLite's `BEGIN IMMEDIATE` on one
//! instance, by a transaction-scoped advisory lock on PostgreSQL across instances — so two rows
//! never claim the same number.

use sqlx::{ColumnIndex, Database, Decode, Encode, QueryBuilder, Row, Type};

use super::history::{Event, HistoryEntry, HistoryQuery};
use super::override_sql::COLUMNS;
use super::rows::micros;
use super::rules::Rule;
use super::sql_parts;
use super::store::StoreError;
use ratelimitd_core::clock::Timestamp;

/// The columns every history query reads.
const HISTORY_COLUMNS: &str =
    "seq, kind, target, version, actor, at, reason, before_json, after_json";

/// The columns `rows::read_rule` reads.
pub(super) const RULE_COLUMNS: &str = "id, domain, descriptor, rate_limit, enabled";

/// Inserts `e` at `now`, numbering it; `RETURNING` the row.
pub(super) fn insert<'a, DB>(e: &'a Event, now: Timestamp) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    Option<String>: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let json = |v: &Option<serde_json::Value>| v.as_ref().map(ToString::to_string);
    let mut b = QueryBuilder::new(format!(
        "INSERT INTO policy_history ({HISTORY_COLUMNS}) SELECT COALESCE(MAX(seq), 0) + 1, "
    ));
    b.push_bind(e.kind.as_str()).push(", ");
    b.push_bind(e.target.as_str());
    b.push(", (SELECT COALESCE(MAX(version), 0) + 1 FROM policy_history WHERE target = ");
    b.push_bind(e.target.as_str()).push("), ");
    b.push_bind(e.actor.as_str()).push(", ");
    b.push_bind(micros(now)).push(", ");
    b.push_bind(e.reason.as_str()).push(", ");
    b.push_bind(json(&e.before)).push(", ");
    b.push_bind(json(&e.after));
    b.push(format!(" FROM policy_history RETURNING {HISTORY_COLUMNS}"));
    b
}

/// One page of rows, one more than the page, newest first.
pub(super) fn select<'a, DB>(q: &'a HistoryQuery) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = sql_parts::select(HISTORY_COLUMNS, "policy_history");
    sql_parts::and_eq(&mut b, "target", q.target.as_ref());
    sql_parts::and_eq(&mut b, "kind", q.kind.as_ref());
    if let Some(s) = q.before_seq {
        b.push(" AND seq < ")
            .push_bind(i64::try_from(s).unwrap_or(i64::MAX));
    }
    sql_parts::page(&mut b, "seq DESC", q.limit);
    b
}

/// The row of `target` at `version`.
pub(super) fn select_version<'a, DB>(target: &'a str, version: u64) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(format!(
        "SELECT {HISTORY_COLUMNS} FROM policy_history WHERE target = "
    ));
    b.push_bind(target)
        .push(" AND version = ")
        .push_bind(i64::try_from(version).unwrap_or(i64::MAX));
    b
}

/// A history row.
pub(super) fn read<R>(row: &R) -> Result<HistoryEntry, StoreError>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let seq: i64 = row.try_get("seq")?;
    let bad = |why: String| StoreError::BadRow {
        id: format!("policy_history {seq}"),
        why,
    };
    let json = |col: &str| -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<String> = row.try_get(col)?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| bad(format!("{col}: {e}"))))
            .transpose()
    };
    let num = |col: &str| -> Result<u64, StoreError> {
        let v: i64 = row.try_get(col)?;
        Ok(u64::try_from(v).unwrap_or(0))
    };
    Ok(HistoryEntry {
        seq: num("seq")?,
        version: num("version")?,
        at: Timestamp::from_micros(num("at")?),
        event: Event {
            kind: row.try_get("kind")?,
            target: row.try_get("target")?,
            actor: row.try_get("actor")?,
            reason: row.try_get("reason")?,
            before: json("before_json")?,
            after: json("after_json")?,
        },
    })
}

/// Creates or replaces rule `rule.id`, written by `who` at `now`.
pub(super) fn upsert_rule<'a, DB>(
    rule: &'a Rule,
    who: &'a str,
    now: Timestamp,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    String: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
    Option<i64>: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
{
    let rl = &rule.rate_limit;
    let text = |k: &str| rl.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    let int = |k: &str| rl.get(k).and_then(serde_json::Value::as_i64);
    let mut b = QueryBuilder::new(
        "INSERT INTO rate_limit_rules (id, domain, descriptor, algorithm, requests_per_unit, \
         unit, unit_multiplier, burst, enabled, created_by, created_at, updated_at, rate_limit) \
         VALUES (",
    );
    let mut v = b.separated(", ");
    v.push_bind(rule.id.as_str());
    v.push_bind(rule.domain.as_str());
    v.push_bind(serde_json::to_string(&rule.descriptor).unwrap_or_default());
    v.push_bind(
        Some(text("algorithm"))
            .filter(|a| !a.is_empty())
            .unwrap_or("fixed_window".into()),
    );
    v.push_bind(int("requests_per_unit").unwrap_or(0));
    v.push_bind(text("unit"));
    v.push_bind(int("unit_multiplier").unwrap_or(1));
    v.push_bind(int("burst"));
    v.push_bind(rule.enabled);
    v.push_bind(who);
    v.push_bind(micros(now));
    v.push_bind(micros(now));
    v.push_bind(serde_json::Value::Object(rule.rate_limit.clone()).to_string());
    b.push(
        ") ON CONFLICT (id) DO UPDATE SET domain = excluded.domain, \
         descriptor = excluded.descriptor, algorithm = excluded.algorithm, \
         requests_per_unit = excluded.requests_per_unit, unit = excluded.unit, \
         unit_multiplier = excluded.unit_multiplier, burst = excluded.burst, \
         enabled = excluded.enabled, created_by = excluded.created_by, \
         updated_at = excluded.updated_at, rate_limit = excluded.rate_limit",
    );
    b
}

/// The row with id `id` of `table`, its `columns` (for `rows::read_rule` or `rows::read_override`).
pub(super) fn select_by_id<'a, DB>(
    columns: &'static str,
    table: &'static str,
    id: &'a str,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    where_id(format!("SELECT {columns} FROM {table}"), id)
}

/// Deletes the row with id `id` from `table`.
pub(super) fn delete_by_id<'a, DB>(table: &'static str, id: &'a str) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    where_id(format!("DELETE FROM {table}"), id)
}

/// `statement WHERE id = id`; the names in `statement` are `'static` constants of the callers,
/// never input.
fn where_id<'a, DB>(statement: String, id: &'a str) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(statement + " WHERE id = ");
    b.push_bind(id);
    b
}

/// Inserts override `o` as `id`, created by `who` at `now`.
pub(super) fn insert_override<'a, DB>(
    id: &'a str,
    o: &'a super::model::NewOverride,
    who: &'a str,
    now: Timestamp,
) -> QueryBuilder<'a, DB>
where
    DB: Database,
    &'a str: Encode<'a, DB> + Type<DB>,
    String: Encode<'a, DB> + Type<DB>,
    i64: Encode<'a, DB> + Type<DB>,
{
    let mut b = QueryBuilder::new(format!(
        "INSERT INTO rate_limit_overrides ({COLUMNS}) VALUES ("
    ));
    let mut v = b.separated(", ");
    v.push_bind(id);
    v.push_bind(o.domain.as_str());
    v.push_bind(serde_json::to_string(&o.descriptor).unwrap_or_default());
    v.push_bind(i64::from(o.requests_per_unit));
    v.push_bind(o.unit.as_str());
    v.push_bind(micros(o.valid_until));
    v.push_bind(o.reason.as_str());
    v.push_bind(who);
    v.push_bind(micros(now));
    b.push(")");
    b
}
