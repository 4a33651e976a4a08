//! The policy database (SQLite and PostgreSQL): its management API, stored overrides and rules,
//! their life, an unavailable database, and the violation log.

mod api;
mod history;
mod lifecycle;
mod overrides;
mod postgres;
mod rules;
mod rules_when;
mod shedding_overrides;
mod unavailable;
mod violations;
mod violations_shedding;
