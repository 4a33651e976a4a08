//! What the integration tests (`tests/it`) and the benchmark examples reach inside the server,
//! and nothing more: hidden from the documentation, not an API. Each name is the item of the
//! module it comes from; the core's items come from `ratelimitd_core` itself.

pub use crate::app::{Running, start};
pub use crate::fleet::auth::{AuthCounts, SignedTransport};
pub use crate::grpc::TlsSettings;
pub use crate::grpc::bounded::SHOULD_RATE_LIMIT;
pub use crate::grpc::server::Coalesce;
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
