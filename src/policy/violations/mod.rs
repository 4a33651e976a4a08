//! The violation log: every reported `OVER_LIMIT` descriptor is counted in a
//! [`Violation`] record. The [`ViolationLog`] observer notes it in the bounded [`Pending`] map
//! without waiting: repeats of one (domain, descriptor, limit, shadow, class, soft) between two writes share
//! one record with a request count (a full map drops and counts new keys); the [`writer`] task
//! takes the map every `VIOLATIONS_BATCH_DELAY` and writes one row per key to the policy
//! database's `rate_limit_violations` table and/or as JSON lines, and deletes rows older than the
//! retention. `GET /v1/violations` reads them back through [`ViolationQuery`], newest first.
//! [`start`] builds the observer and spawns the writer from [`ViolationOptions`].

pub(crate) mod cursor;
pub(crate) mod metrics;
pub(crate) mod observer;
mod options;
pub(crate) mod pending;
pub(crate) mod query;
pub(super) mod sql;
mod wiring;
pub(crate) mod writer;

use std::borrow::Cow;
use std::sync::Arc;

use super::model::PathEntry;
use ratelimitd_core::clock::Timestamp;

pub use cursor::Cursor;
pub(crate) use observer::ViolationLog;
pub(crate) use options::{ViolationOptions, ViolationSinks};
pub(crate) use pending::Pending;
pub use query::ViolationQuery;
pub(crate) use wiring::{ViolationDeps, instance_name, start};

/// One over-limit descriptor, as the request path saw it: its first denial, with the repeats
/// that came before the writer took it counted in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Violation {
    /// The request's domain.
    pub domain: String,
    /// The descriptor's entries, outermost first.
    pub descriptor: Vec<PathEntry>,
    /// The value of the descriptor's `client_key` entry, when it has one (indexed).
    pub client_key: Option<String>,
    /// The reported limit's name (its `name`, else its full key).
    pub limit_name: String,
    /// The limit's rate.
    pub requests_per_unit: u32,
    /// The limit's unit (`SECOND`, `MINUTE`, ...; empty when it has none).
    pub unit: Cow<'static, str>,
    /// The hits the denied requests asked for, summed.
    pub hits: u64,
    /// The counter after the hits of the last denial that read one (none for the local cache or
    /// the failure policy).
    pub usage: Option<u64>,
    /// How many denied decisions this record covers (1 for rows older than aggregation).
    pub requests: u64,
    /// What decided it ([`ratelimitd_core::limiter::outcome::Source::as_str`]).
    pub source: Cow<'static, str>,
    /// True when it was not enforced: the limit's `shadow_mode` or the service's `SHADOW_MODE`.
    pub shadow: bool,
    /// The request's class, for a limit with priority classes (a name from the config).
    pub class: Option<String>,
    /// True when the denial came from the soft zone's draw (a soft limit), not from a bound.
    pub soft: bool,
    /// When the first of them was decided (the limiter's clock).
    pub at: Timestamp,
    /// When the last of them was decided.
    pub last_at: Timestamp,
    /// The instance that decided it (`INSTANCE_ID`, else the host name).
    pub instance: Arc<str>,
}

/// A violation with the id it is stored under.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredViolation {
    /// Its id (`vi_` and 16 hex digits), which orders records of the same microsecond.
    pub id: String,
    /// The record.
    pub violation: Violation,
}

impl StoredViolation {
    /// Its JSON form: in `GET /v1/violations` answers and in the JSON log lines.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let v = &self.violation;
        serde_json::json!({
            "id": self.id,
            "domain": v.domain,
            "descriptor": v.descriptor,
            "client_key": v.client_key,
            "limit": {
                "name": v.limit_name,
                "requests_per_unit": v.requests_per_unit,
                "unit": v.unit.to_ascii_lowercase(),
            },
            "hits": v.hits,
            "requests": v.requests,
            "count": v.usage,
            "source": v.source,
            "shadow": v.shadow,
            "class": v.class,
            "soft": v.soft,
            "at": v.at.to_rfc3339(),
            "last_at": v.last_at.to_rfc3339(),
            "instance": &*v.instance,
        })
    }
}
