//! The rate limiter of ratelimitd as a library: the configuration model (envoyproxy/ratelimit's
//! YAML, validated with Go's error texts), the limiter that decides a request against it, the
//! rate limit algorithms, and the embedded memory store. The ratelimitd server is built on this
//! crate and adds the edges (gRPC, HTTP, admin), Redis, the policy database, RLQS, xDS and
//! observability; nothing here depends on any of them.
//!
//! # Embedding the limiter
//! Compile a configuration, put a [`RateLimiter`] over a [`MemoryStore`] and a [`Clock`], and
//! decide [`Request`]s; each [`Response`] says whether the request is over a limit and, per
//! descriptor, what is left.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use ratelimitd_core::{
//!     Code, CompileOptions, ConfigFile, Descriptor, LimiterOptions, ManualClock, MemoryStore,
//!     RateLimiter, Request, Timestamp, compile,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let yaml = r#"
//! domain: api
//! descriptors:
//!   - key: user
//!     rate_limit: {unit: minute, requests_per_unit: 2}
//! "#;
//! let config = compile(
//!     &[ConfigFile { name: "api.yaml".into(), contents: yaml.into() }],
//!     &CompileOptions::default(),
//! )?;
//!
//! // Time is a parameter: a manual clock makes the example exact.
//! let clock = Arc::new(ManualClock::new(Timestamp::from_secs(1_700_000_000)));
//! let store = Arc::new(MemoryStore::new(100_000));
//! let limiter = RateLimiter::new(store, clock.clone(), LimiterOptions::default());
//!
//! let alice = Request::new("api", vec![Descriptor::of(&[("user", "alice")])]);
//! let codes = [
//!     limiter.should_rate_limit(Some(&config), &alice).await?.overall_code,
//!     limiter.should_rate_limit(Some(&config), &alice).await?.overall_code,
//!     limiter.should_rate_limit(Some(&config), &alice).await?.overall_code,
//! ];
//! assert_eq!(codes, [Code::Ok, Code::Ok, Code::OverLimit]);
//!
//! // Another user has a counter of their own.
//! let bob = Request::new("api", vec![Descriptor::of(&[("user", "bob")])]);
//! let response = limiter.should_rate_limit(Some(&config), &bob).await?;
//! assert_eq!(response.overall_code, Code::Ok);
//! assert_eq!(response.statuses[0].limit_remaining, 1);
//!
//! // The next minute is a new window.
//! clock.advance(Duration::from_secs(60));
//! let response = limiter.should_rate_limit(Some(&config), &alice).await?;
//! assert_eq!(response.overall_code, Code::Ok);
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//! - [`clock`]: the only reader of system time; [`ManualClock`] for tests.
//!   [`stripe`]: per-core stripes for state every request writes (stat counters, hot keys).
//! - [`algorithm`]: pure rate limit algorithms, functions of (state, limit, hits, now).
//! - [`config`]: YAML model, validation, compiled matching tree, file loader (pure except the loader).
//! - [`resilience`]: the circuit breaker a store puts around each backend target, and the
//!   live-instance count the local fallback divides limits by.
//! - [`store`]: the one [`Store`] trait, the embedded [`MemoryStore`], the local side of leases
//!   and the local over-limit cache.
//! - [`region`]: the shares of worldwide limits each region enforces, and their bounds.
//! - [`limiter`]: request → plan per descriptor → one store batch → one outcome per limit →
//!   statuses; the request and response types, the caps, the cache key format and the index of
//!   stored overrides it reads.
//!
//! Dependencies point down that list: `algorithm` and `config` use `clock`; `store` uses them;
//! `limiter` uses everything above it. Time comes from [`clock`] (clippy's `disallowed-methods`
//! in the workspace's `clippy.toml` enforces that).
//!
//! The modules are public because the server builds on their parts (its Redis store implements
//! [`Store`] and decides with the algorithms' own functions; its edges convert to and from the
//! limiter's types); an embedder needs only the names re-exported at the top of this crate.

pub mod algorithm;
pub mod clock;
pub mod config;
pub mod limiter;
pub mod random;
pub mod region;
pub mod resilience;
pub mod store;
pub mod stripe;
#[cfg(test)]
pub(crate) mod test_support;

pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use config::{
    CompileOptions, ConfigError, ConfigErrors, ConfigFile, FailureMode, LoadError, RateLimitConfig,
    Unit, compile, load_path,
};
pub use limiter::{
    Code, CurrentLimit, Descriptor, DescriptorStatus, Entry, KeyBuilder, KeyFormat, LimiterOptions,
    Limits, Override, RateLimiter, Request, RequestError, Response,
};
pub use store::memory::MemoryStore;
pub use store::{Store, StoreError};
