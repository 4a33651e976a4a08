//! The policy database: rules and time-limited overrides managed at runtime
//! over the admin API, kept in SQLite (a file in `RATELIMITD_DATA_DIR`) or PostgreSQL behind
//! [`PolicyStore`], and the violation log written to it ([`violations`], an insight feature).
//!
//! The database never sits on the request path. [`Policy`] reads every active override into an
//! [`OverrideIndex`] and swaps it into an [`Overrides`] handle the limiter reads once per request;
//! each change it writes is applied to the index in place, and it re-reads every
//! `POLICY_REFRESH_INTERVAL`. Rules become YAML documents ([`rules::to_files`]) that the reload
//! pipeline compiles with the files, with the same validator, into the one snapshot. When the
//! database fails, the last index and snapshot stay in service and the API answers 503; when it
//! cannot be opened at all ([`opening`]), the service says so at ERROR, is not ready, enforces the
//! last good copy ([`snapshot`]) and retries in the background. Expired overrides are deleted
//! after a retention ([`purge`]). [`start`] opens it for the composition root and spawns its
//! refresh, copy, purge and retry tasks.

pub(crate) mod auth;
mod backend;
pub(crate) mod expiry;
pub(crate) mod history;
mod history_sql;
pub(crate) mod input;
pub(crate) mod lazy;
pub(crate) mod model;
pub(crate) mod opening;
mod options;
pub(crate) mod override_sql;
pub(crate) mod postgres;
pub(crate) mod purge;
mod rows;
pub(crate) mod rules;
pub(crate) mod runtime;
pub(crate) mod snapshot;
mod sql_parts;
mod sql_store;
pub(crate) mod sqlite;
pub(crate) mod store;
pub(crate) mod token_file;
pub(crate) mod violations;
mod wiring;

pub(crate) use auth::{Role, Tokens};
pub(crate) use model::{FieldError, StoredOverride};
pub(crate) use options::PolicySettings;
pub(crate) use ratelimitd_core::limiter::{OverrideIndex, Overrides};
pub(crate) use runtime::Policy;
pub(crate) use store::PolicyStore;
pub(crate) use wiring::{PolicyDeps, PolicyHandle, start};
