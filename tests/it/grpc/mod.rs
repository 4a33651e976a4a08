//! `ShouldRateLimit` over real gRPC with the manual clock, most scenarios on every store: the
//! contract's scenarios, the algorithms, several limits on one descriptor, quota groups and the
//! limit that fired, refunds, and the server's transport (TLS, mTLS, unix socket).

mod algorithms;
mod concurrency;
mod counting;
mod matching;
mod multi_limits;
mod quota_groups;
mod refunds;
mod scenarios;
pub(crate) mod shedding;
mod tls;
mod usage_estimates;
mod usage_reports;
mod when;
mod wire;
