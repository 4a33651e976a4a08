//! A client for ratelimitd, a global rate limit service, and a
//! `tower::Layer` that rate limits an axum or hyper server (any tower service over
//! `http::Request`) through it.
//!
//! - [`Client`] asks `POST /check` on ratelimitd's HTTP port: pooled keep-alive connections, a
//!   deadline per call, and a typed [`Error`] for every answer it cannot use (never a panic).
//! - [`RateLimitLayer`] maps each request to a [`CheckRequest`] with a closure, answers `429` with
//!   ratelimitd's `Retry-After`, `RateLimit` and `RateLimit-Policy` headers when it is denied (the
//!   service is not called), waits the shaping delay when ratelimitd asks for one, and applies a
//!   [`FailurePolicy`] — fail open, fail closed, or a local fallback limit — when ratelimitd is
//!   unreachable or too slow.
//! - [`Retrying`] calls a rate-limited API (ratelimitd's `/check` or any other) again after a
//!   `429` or `503`: never earlier than its `Retry-After` or draft `RateLimit` header asked, with
//!   full jitter so clients denied together do not return together, within a number of attempts,
//!   a total wait and an optional shared [`RetryBudget`].
//! - With the `grpc` feature, `grpc::GrpcClient` calls Envoy's `ShouldRateLimit` over gRPC.
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{Router, routing::get};
//! use ratelimitd_client::{CheckRequest, Client, FailurePolicy, LocalLimit, RateLimitLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::builder("http://127.0.0.1:8080")
//!     .timeout(Duration::from_millis(100))
//!     .build()?;
//! let limit = RateLimitLayer::new(client, |req: &http::Request<axum::body::Body>| {
//!     let key = req.headers().get("x-api-key")?.to_str().ok()?;
//!     Some(CheckRequest::new(key).endpoint(req.uri().path()))
//! })
//! .failure_policy(FailurePolicy::Local(
//!     LocalLimit::new(100, Duration::from_secs(60)).into(),
//! ));
//! let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(limit);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The failure policy, the headers and a Python client are described in the repository's
//! `docs/clients.md`.

mod answer;
mod check;
mod client;
pub mod clock;
mod error;
#[cfg(feature = "grpc")]
pub mod grpc;
mod layer;
mod policy;
mod release;
mod retry;

pub use check::{CheckRequest, Decision, Descriptor, Entry, FORWARDED_HEADERS};
pub use client::{Client, ClientBuilder, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_TIMEOUT, MAX_USAGE};
pub use error::Error;
pub use layer::{
    BoxError, RateLimitLayer, RateLimitService, ResponseBody, UsageFn, header_key, usage_header,
};
pub use policy::{FailurePolicy, LocalLimit, LocalVerdict};
pub use release::{Release, ReleaseHook, ReleaseOutcome};
pub use retry::{
    RetryBudget, Retryable, Retrying, parse_ratelimit, parse_retry_after, server_hint,
};
