//! Generated xDS protos (see `proto/README.md`), laid out by protobuf package so the generated
//! code's relative paths resolve. Only the xDS client and the tests use these.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// `envoy.*` packages.
pub mod envoy {
    /// `envoy.config.*`.
    pub mod config {
        /// `envoy.config.core.*`.
        pub mod core {
            /// `envoy.config.core.v3` (`Node` only).
            pub mod v3 {
                include!(concat!(env!("OUT_DIR"), "/xds/envoy.config.core.v3.rs"));
            }
        }
    }
    /// `envoy.service.*`.
    pub mod service {
        /// `envoy.service.discovery.*`.
        pub mod discovery {
            /// `envoy.service.discovery.v3`: ADS.
            pub mod v3 {
                include!(concat!(
                    env!("OUT_DIR"),
                    "/xds/envoy.service.discovery.v3.rs"
                ));
            }
        }
    }
}

/// `google.*` packages.
pub mod google {
    /// `google.rpc`: `Status`.
    pub mod rpc {
        include!(concat!(env!("OUT_DIR"), "/xds/google.rpc.rs"));
    }
}

/// `ratelimit.*` packages (go-control-plane).
pub mod ratelimit {
    /// `ratelimit.config.*`.
    pub mod config {
        /// `ratelimit.config.ratelimit.*`.
        pub mod ratelimit {
            /// `ratelimit.config.ratelimit.v3`: `RateLimitConfig`.
            pub mod v3 {
                include!(concat!(
                    env!("OUT_DIR"),
                    "/xds/ratelimit.config.ratelimit.v3.rs"
                ));
            }
        }
    }
}
