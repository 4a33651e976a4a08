//! ratelimitd — a global rate limit service for Envoy, a drop-in replacement for envoyproxy/ratelimit.
//!
//! # Layout
//! - [`settings`]: Go environment variables and command-line flags, and the small value types they
//!   name (key format, StatsD protocol, ...).
//! - [`clock`]: the only reader of system time; [`clock::ManualClock`] for tests.
//!   [`stripe`]: per-core stripes for state every request writes (stat counters, hot keys).
//! - [`algorithm`]: pure rate limit algorithms, functions of (state, limit, hits, now).
//! - [`config`]: YAML model, validation, compiled matching tree, file loader (pure except the loader).
//! - [`resilience`]: the circuit breaker per Redis target and the live-instance count the local
//!   fallback divides limits by.
//! - [`store`]: the one store trait, the embedded memory store and Redis; [`telemetry`]: logging.
//! - [`policy`]: the policy database (SQLite) behind one trait, and the index of stored
//!   overrides the limiter reads; the admin API that writes it lives in `http::admin`.
//! - [`limiter`]: request → plan per descriptor → one store batch → one outcome per limit (tagged
//!   with its source) → statuses; request/response types without protos.
//!   [`health`]: health components, mirrored to gRPC health.
//! - [`listener`]: the connection cap and the silent/idle timeouts every server's connections go
//!   through.
//! - [`metrics`]: stat counters (bounded), Prometheus and StatsD sinks.
//! - [`reload`]: the live configuration snapshot, its atomic swap, and the file watcher that reloads it.
//! - [`service`]: one snapshot + the limiter; what both edges call.
//! - [`explain`]: which limits, overrides and counters apply to a request, counting no hit
//!   (`/v1/explain`, the console's key search, `ratelimitd explain`).
//! - [`grpc`], [`http`]: the edges (RLS v3 + health + TLS; `/json`, `/healthcheck`, debug port).
//!   The generated Envoy protos live in [`grpc::pb`], and their unit numbers in [`grpc::unit`].
//! - [`rlqs`]: the Rate Limit Quota Service (Envoy's `rate_limit_quota` filter): buckets planned
//!   by the limiter, budgets split by demand shared through the store, served on the gRPC port.
//! - [`xds`]: the xDS configuration source (`CONFIG_TYPE=GRPC_XDS_SOTW`), feeding `reload`'s
//!   pipeline like the file watcher; its protos live in `xds::pb`.
//! - [`app`]: composition root (listeners, store, config, watchers, signals, drain);
//!   [`validate`]: the `ratelimitd validate` command.
//!
//! # Layering
//! Dependencies point down the list above, never up. From the bottom: `settings`, `clock`,
//! `stripe`,
//! `algorithm`, `config` (config builds on algorithm), `resilience` (clock only); then `store`,
//! `telemetry` and `policy`; `limiter` and `health`; `listener`; `metrics`, `reload`, `insight`
//! (the limiter's observers), `service`, `explain` (explain plans like the limiter and reads
//! insight's violation log; service reads reload's snapshot; metrics names neither:
//! `app` hands it readers of the load counts and hot keys);
//! the edges `grpc` and `http` and the `xds` config source (`/json` borrows gRPC's unit numbers,
//! grpc never imports http); `app` and `validate` on top. A type that a lower module needs lives
//! in that lower module (`settings::KeyFormat` is read by the limiter, not the reverse), and an
//! upper module hands the lower one a closure or value instead of being named by it. Protos never
//! leave their edge (`grpc`, `xds`); time comes from `clock` (clippy's `disallowed-methods` in
//! `clippy.toml` enforces that).
//!
//! The longer map, with the request paths and where each feature lives, is
//! `docs/design/architecture.md`; the behaviour the tests check is `docs/design/contract.md`.

pub mod algorithm;
pub mod app;
pub mod clock;
pub mod config;
pub mod explain;
pub mod grpc;
pub mod health;
pub mod http;
pub mod insight;
pub mod limiter;
pub mod listener;
pub mod metrics;
pub mod policy;
pub mod reload;
pub mod resilience;
pub mod rlqs;
pub mod service;
pub mod settings;
pub mod store;
pub mod stripe;
pub mod telemetry;
pub mod validate;
pub mod xds;
