//! The policy database (issue 16): time-limited overrides (and, later, rules) managed at runtime
//! over the admin API, kept in SQLite (a file in `RATELIMITD_DATA_DIR`) behind [`PolicyStore`].
//!
//! The database never sits on the request path. [`Policy`] reads every active override into an
//! [`OverrideIndex`] and swaps it into an [`Overrides`] handle the limiter reads once per request;
//! it re-reads after each change it writes and every `POLICY_REFRESH_INTERVAL`. When the database
//! fails, the last index stays in service and the API answers 503.

pub mod auth;
pub mod index;
pub mod input;
pub mod model;
pub mod runtime;
pub mod sqlite;
pub mod store;

pub use auth::Tokens;
pub use index::{OverrideIndex, Overrides};
pub use model::{FieldError, NewOverride, StoredOverride};
pub use runtime::Policy;
pub use store::{PolicyStore, StoreError};
