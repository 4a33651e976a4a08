//! Generated Envoy RLS v3 and RLQS v3 types (tonic/prost, compiled from `proto/` by `build.rs`). Only the
//! gRPC edge and its clients (tests, examples) use them; `/json` borrows just the unit mapping in
//! `crate::grpc::unit`. The limiter, the stores and the config never see a proto. The module tree
//! mirrors the proto packages so the generated code's relative paths (`super::super::...`) resolve.

// The generated code's doc comments are the protos' own, not ours to reword.
#![allow(clippy::doc_markdown)]

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
        /// `envoy.service.rate_limit_quota.*`.
        pub mod rate_limit_quota {
            /// `envoy.service.rate_limit_quota.v3` (RLQS; served by `crate::rlqs`).
            pub mod v3 {
                tonic::include_proto!("envoy.service.rate_limit_quota.v3");
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
