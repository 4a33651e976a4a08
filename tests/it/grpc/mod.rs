//! `ShouldRateLimit` over real gRPC with the manual clock, most scenarios on every store: the
//! contract's scenarios, the algorithms, several limits on one descriptor, refunds, and the
//! server's transport (TLS, mTLS, unix socket).

mod algorithms;
mod concurrency;
mod counting;
mod multi_limits;
mod refunds;
mod scenarios;
mod tls;
mod wire;
