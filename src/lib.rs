//! ratelimitd — a global rate limit service for Envoy, a drop-in replacement for envoyproxy/ratelimit.
//!
//! # Layout
//! - [`config`]: YAML model, validation, compiled matching tree, file loader (pure except the loader).
//! - [`clock`]: the only reader of system time; [`clock::ManualClock`] for tests.
//! - [`algorithm`]: pure rate limit algorithms, functions of (state, limit, hits, now).
//! - [`store`]: the one store trait and the embedded memory store.
//! - [`limiter`]: request → store ops → statuses; request/response types without protos.
//! - [`metrics`]: stat counters (bounded), Prometheus and StatsD sinks.
//! - [`reload`]: the live configuration snapshot, its atomic swap, and the file watcher that reloads it.
//! - [`service`]: one snapshot + the limiter; what both edges call.
//! - [`grpc`], [`http`]: the edges (RLS v3 + health + TLS; `/json`, `/healthcheck`, debug port).
//! - [`health`]: health components, mirrored to gRPC health.
//! - [`app`]: composition root (listeners, store, config, watchers, signals, drain);
//!   [`telemetry`]: logging.
//! - [`validate`]: the `ratelimitd validate` command.
//! - [`settings`]: Go environment variables and command-line flags.
//! - [`xds`]: the xDS configuration source (`CONFIG_TYPE=GRPC_XDS_SOTW`).
//! - [`proto`]: generated Envoy RLS v3 types; used only by the gRPC edge.

pub mod algorithm;
pub mod app;
pub mod clock;
pub mod config;
pub mod grpc;
pub mod health;
pub mod http;
pub mod limiter;
pub mod metrics;
pub mod reload;
pub mod service;
pub mod settings;
pub mod store;
pub mod telemetry;
pub mod validate;
pub mod xds;

/// Generated Envoy protos. Only `grpc` (and the tests) use these; the core never sees a proto.
#[allow(missing_docs, clippy::all)]
pub mod proto {
    /// `envoy.*` packages.
    pub mod envoy {
        /// `envoy.service.*`.
        pub mod service {
            /// `envoy.service.ratelimit.*`.
            pub mod ratelimit {
                /// `envoy.service.ratelimit.v3`.
                pub mod v3 {
                    tonic::include_proto!("envoy.service.ratelimit.v3");
                }
            }
        }
        /// `envoy.extensions.*`.
        pub mod extensions {
            /// `envoy.extensions.common.*`.
            pub mod common {
                /// `envoy.extensions.common.ratelimit.*`.
                pub mod ratelimit {
                    /// `envoy.extensions.common.ratelimit.v3`.
                    pub mod v3 {
                        tonic::include_proto!("envoy.extensions.common.ratelimit.v3");
                    }
                }
            }
        }
        /// `envoy.config.*`.
        pub mod config {
            /// `envoy.config.core.*`.
            pub mod core {
                /// `envoy.config.core.v3`.
                pub mod v3 {
                    tonic::include_proto!("envoy.config.core.v3");
                }
            }
        }
        /// `envoy.type.*`.
        pub mod r#type {
            /// `envoy.type.v3`.
            pub mod v3 {
                tonic::include_proto!("envoy.r#type.v3");
            }
        }
    }
}
