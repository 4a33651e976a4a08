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

pub mod auth;
pub mod expiry;
pub mod input;
pub mod lazy;
pub mod model;
pub mod opening;
mod options;
pub mod override_sql;
pub mod postgres;
pub mod purge;
mod rows;
pub mod rules;
pub mod runtime;
pub mod snapshot;
pub mod sqlite;
mod sqlite_rules;
pub mod store;
pub mod violations;
mod wiring;

pub use crate::limiter::{OverrideIndex, Overrides};
pub use auth::Tokens;
pub use model::{FieldError, NewOverride, StoredOverride};
pub use options::PolicySettings;
pub use runtime::Policy;
pub use store::{PolicyStore, StoreError};
pub use wiring::{PolicyDeps, PolicyHandle, start};
