//! What the integration tests (`tests/it`) and the benchmark examples reach inside the server,
//! and nothing more: hidden from the documentation, not an API. Each name is the item of the
//! module it comes from; the core's items come from `ratelimitd_core` itself. Below them, the
//! helpers written once for the tests and examples: the loopback settings and request builders,
//! and the walk over the source files, which the library's layering test uses too (the
//! integration tests cannot reach code the library compiles for its own tests only).

pub use crate::app::{Running, start};
pub use crate::fleet::auth::{AuthCounts, SignedTransport};
pub use crate::grpc::TlsSettings;
pub use crate::grpc::bounded::SHOULD_RATE_LIMIT;
pub use crate::grpc::server::{Coalesce, h2_settings};
pub use crate::grpc::status_of;
pub use crate::grpc::tls::ReloadingTls;
pub use crate::health::Health;
pub use crate::http::json::parse_request;
pub use crate::http::{HttpState, router};
pub use crate::insight::hotkeys::HotKeys;
pub use crate::metrics::{ConfigLoads, Metrics};
pub use crate::policy::input::parse_override;
pub use crate::policy::rules::{Rule, parse_rule, to_files};
pub use crate::policy::violations::{Cursor, ViolationQuery};
pub use crate::region::LEASE_INTERVALS;
pub use crate::reload::{ConfigHandle, ReloadOutcome, WatchOptions, WatchTarget, watch_loop};
pub use crate::rlqs::stream::Stream;
pub use crate::rlqs::{Board, MemoryBoard, Shared};
pub use crate::service::Service;
pub use crate::settings::edges::DEFAULT_CHECK_MAX_BODY_BYTES;
pub use crate::settings::parse::{go_bool, go_duration, uint_in};
#[cfg(feature = "dynamodb")]
pub use crate::store::dynamodb::DynamoStore;
pub use crate::store::redis::RedisStore;
pub use crate::xds::pb as xds_pb;

use std::path::{Path, PathBuf};

use crate::grpc::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use crate::grpc::pb::envoy::service::ratelimit::v3::RateLimitRequest;

/// Every listener on 127.0.0.1 with an ephemeral port: the settings a test or a benchmark starts
/// the server with, so that it binds nothing else.
pub const LOOPBACK: [(&str, &str); 8] = [
    ("HOST", "127.0.0.1"),
    ("PORT", "0"),
    ("GRPC_HOST", "127.0.0.1"),
    ("GRPC_PORT", "0"),
    ("DEBUG_HOST", "127.0.0.1"),
    ("DEBUG_PORT", "0"),
    ("ADMIN_HOST", "127.0.0.1"),
    ("ADMIN_PORT", "0"),
];

/// A descriptor of plain entries: no limit and no hits of its own.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: (entries.iter())
            .map(|(k, v)| Entry {
                key: (*k).to_string(),
                value: (*v).to_string(),
            })
            .collect(),
        limit: None,
        hits_addend: None,
        is_negative_hits: false,
    }
}

/// A `ShouldRateLimit` request on `domain` of plain descriptors (`hits_addend` 0: one hit each).
pub fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors: descriptors.iter().map(|d| descriptor(d)).collect(),
        hits_addend: 0,
    }
}

/// Every `.rs` file under `dir`, recursively: the source a test reads when it checks the code
/// itself (the layering rules, the routes the OpenAPI description must match).
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}
