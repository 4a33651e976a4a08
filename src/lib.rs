//! ratelimitd — a global rate limit service for Envoy, a drop-in replacement for envoyproxy/ratelimit.
//!
//! The server crate: the edges, Redis, the policy database, RLQS, xDS, observability, settings
//! and the composition root, on top of the core library `ratelimitd_core` (the limiter, its
//! algorithms, the configuration model and the memory store), which it imports by that name.
//! Cargo keeps the core free of the server: it does not depend on this crate.
//!
//! # The public face
//! The modules are private; what the `ratelimitd` binary and an embedder need is re-exported
//! here: the settings ([`Settings`] from the environment and the command line, [`Cli`],
//! [`Command`]), logging and traces ([`init_telemetry`]), the server ([`run`] until shutdown,
//! [`report`] for its error), the one-shot commands ([`run_tool`], or each alone: [`validate()`],
//! [`explain()`], [`reset()`]; [`dynamodb_create_table`]) and the environment they read
//! ([`env_vars`]), and the Envoy protos the gRPC port speaks ([`pb`], for a Rust client).
//! The integration tests and the benchmark examples reach what
//! they need through `testing`, which is hidden and is not an API. To embed the limiter without
//! the server, depend on `ratelimitd_core`.
//!
//! # Layout
//! - `settings`: Go environment variables and command-line flags, translated into the options
//!   of the parts they configure (the features' own options types and the core's).
//! - `store`: the core's store trait and memory store, and Redis; `telemetry`: logging.
//! - `policy`: the policy database (SQLite or PostgreSQL) behind one trait, which builds the
//!   core's index of stored overrides; the admin API that writes it lives in `http::admin`.
//! - `health`: health components, mirrored to gRPC health.
//! - `listener`: the connection cap and the silent/idle timeouts every server's connections go
//!   through.
//! - `metrics`: the Go stats' counters (bounded), the registry the features add their own
//!   metrics to, and the Prometheus and StatsD sinks.
//! - `region`: limits shared by regions: the load check against `REGION`, and the sync that
//!   moves demand-following shares through the global store (`GLOBAL_REDIS_*`).
//! - `reload`: the live configuration snapshot, its atomic swap, and the file watcher that reloads it.
//! - `insight`: the limiter's observers (hot keys, decision log).
//! - `service`: one snapshot + the limiter; what both edges call.
//! - `explain`: which limits, overrides and counters apply to a request, counting no hit
//!   (`/v1/explain`, the console's key search, `ratelimitd explain`), and counter resets
//!   (`/v1/counters/reset`, `ratelimitd reset`).
//! - `grpc`, `http`: the edges (RLS v3 + health + TLS, and the gRPC port's transport
//!   `grpc::server`; `/json`, `/healthcheck`, debug port).
//!   The generated Envoy protos live in `grpc::pb`, and their unit numbers in `grpc::unit`.
//! - `rlqs`: the Rate Limit Quota Service (Envoy's `rate_limit_quota` filter): buckets planned
//!   by the limiter, budgets split by demand shared through the store, served on the gRPC port.
//! - `xds`: the xDS configuration source (`CONFIG_TYPE=GRPC_XDS_SOTW`), feeding `reload`'s
//!   pipeline like the file watcher; its protos live in `xds::pb`.
//! - `app`: composition root (listeners, store, config, watchers, signals, drain);
//!   `validate`: the `ratelimitd validate` command.
//!
//! # Layering inside the server
//! Dependencies point down a table of layers, never up: the server module table of
//! `docs/design/architecture.md`, from `app`, `validate`, `settings` and `testing` at the top, through the
//! edges (`http`; `rlqs`, `xds`; `grpc`), `explain`, `service`, `fleet`, `insight`, `policy`,
//! `reload`, `region` and `health`, `store`, down to `metrics` (the Go stats' counters, the
//! registry each feature registers its own metrics with from its `start`, and the sinks; it names
//! no feature), `listener` and `telemetry`, and `background` and `secret` below them all. A
//! unit test (`src/layering.rs`) reads that table and fails when a module names one at a row
//! above its own, or when a module has no row.
//! Protos never leave their edge (`grpc`, `xds`).
//!
//! A feature owns its wiring: `rlqs::start`, `policy::start`, `policy::violations::start`,
//! `insight::start`, `metrics::start`, `health::start`, `xds::start`, `reload::start` (the files),
//! `store::leases::start`, `store::sweeper::start` and `store::redis::heartbeat::start` each take
//! the part's own options (or the few values it needs) and what it shares (a named struct when it
//! is more than a couple of handles), registers its own metrics with the stats there
//! (`metrics::Metrics::register`), and may name the modules below it that it plugs into (the
//! policy database's start compiles its rules through `reload`). `settings` sits at the top next to `app`: it translates environment
//! variables and flags into those options and the core's; the components it configures define
//! their options types in their own folders (`grpc::GrpcServerSettings`, `http::EdgeSettings`,
//! `listener::ConnLimits`, `metrics::Observability`, `store::redis::RedisConfig`, ...) and never
//! name it. A unit test (`src/layering.rs`) fails when a module outside `settings`, `app`,
//! `testing` and `main` names `crate::settings`. `secret` (a value no log shows) is below them all.
//!
//! The longer map, with the request paths and where each feature lives, is
//! `docs/design/architecture.md`; the behaviour the tests check is `docs/design/contract.md`.

mod app;
mod background;
mod explain;
mod fleet;
mod grpc;
mod health;
mod http;
mod insight;
#[cfg(test)]
mod layering;
mod listener;
mod metrics;
mod policy;
mod region;
mod reload;
mod rlqs;
mod secret;
mod service;
mod settings;
mod store;
mod telemetry;
#[doc(hidden)]
pub mod testing;
mod validate;
mod xds;

pub use app::commands::{dynamodb_create_table, env_vars, run_tool};
pub use app::{AppError, report, run};
pub use explain::client::run as explain;
pub use explain::reset_client::run as reset;
pub use grpc::pb;
pub use settings::{Cli, Command, ExplainArgs, ResetArgs, Settings, SettingsError};
pub use telemetry::{Telemetry, TelemetryError, TelemetryOptions, init as init_telemetry};
pub use validate::run as validate;
