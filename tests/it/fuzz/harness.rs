//! The service assembled in process as `app::start` assembles it, minus sockets: a limiter on the
//! embedded store with a manual clock, the configuration below published, and the main HTTP
//! router, driven with tower's `oneshot` (no listener needed for a fuzz loop).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use ratelimitd::Settings;
use ratelimitd::testing::ConfigHandle;
use ratelimitd::testing::Health;
use ratelimitd::testing::HttpState;
use ratelimitd::testing::Service;
use ratelimitd_core::MemoryStore;
use ratelimitd_core::clock::{ManualClock, Timestamp};
use ratelimitd_core::config::{self, CompileOptions, ConfigFile};
use ratelimitd_core::limiter::{HeaderNames, KeyBuilder, LimiterOptions, RateLimiter};
use tower::ServiceExt;

/// Every algorithm, several limits on one node, a nested path, unlimited and a wildcard, in the
/// gRPC test domain `d` and in `/check`'s default domain `api`. Windows are at most a day.
const DESCRIPTORS: &str = r#"
descriptors:
  - {key: fw, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: tb, rate_limit: {unit: second, requests_per_unit: 3, algorithm: token_bucket, burst: 6}}
  - {key: lb, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket}}
  - {key: sw, rate_limit: {unit: hour, requests_per_unit: 100, algorithm: sliding_window}}
  - {key: sl, rate_limit: {unit: second, requests_per_unit: 4, algorithm: sliding_log}}
  - {key: wk, value: "a*", rate_limit: {unit: day, requests_per_unit: 2, unit_multiplier: 1}}
  - {key: un, rate_limit: {unlimited: true}}
  - {key: zero, rate_limit: {unit: second, requests_per_unit: 0}}
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 20, algorithm: leaky_bucket}
    descriptors:
      - {key: endpoint, rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket}}
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 5}
      - {unit: day, requests_per_unit: 50, algorithm: token_bucket}
"#;

/// Descriptor keys the configuration knows (and one it does not).
pub(super) const KEYS: [&str; 12] = [
    "fw",
    "tb",
    "lb",
    "sw",
    "sl",
    "wk",
    "un",
    "zero",
    "client_key",
    "endpoint",
    "multi",
    "nope",
];

/// The longest window of the configuration: a day.
pub(super) const LONGEST_WINDOW: Duration = Duration::from_secs(86_400);

/// The start of the manual clock.
pub(super) const T0: u64 = 1_700_000_000;

/// The service on a fresh embedded store, with its clock.
pub(super) struct InProcess {
    pub service: Arc<Service>,
    pub clock: Arc<ManualClock>,
    pub router: Router,
}

/// The compiled configuration (domains `d` and `api`, then `extra`).
pub(super) fn config(extra: &[(&str, &str)]) -> config::RateLimitConfig {
    let shared = ["d", "api"].into_iter().map(|d| ConfigFile {
        name: format!("{d}.yaml"),
        contents: format!("domain: {d}\n{DESCRIPTORS}"),
    });
    let extra = extra.iter().map(|(name, contents)| ConfigFile {
        name: name.to_string(),
        contents: contents.to_string(),
    });
    let files: Vec<ConfigFile> = shared.chain(extra).collect();
    config::compile(&files, &CompileOptions::default()).expect("the fuzz configuration compiles")
}

impl InProcess {
    /// The service with the default settings (caps included) and the rate limit headers on.
    pub(super) fn start() -> InProcess {
        let settings = Settings::defaults();
        let clock = Arc::new(ManualClock::new(Timestamp::from_secs(T0)));
        let store = Arc::new(MemoryStore::with_limits(
            settings.memory_max_keys,
            settings.limits.memory_max_bytes,
        ));
        let options = LimiterOptions {
            headers: Some(HeaderNames {
                limit: settings.limit_limit_header.clone(),
                remaining: settings.limit_remaining_header.clone(),
                reset: settings.limit_reset_header.clone(),
            }),
            dynamic_metadata: true,
            keys: KeyBuilder::new("", settings.cache_key_format),
            near_limit_ratio: settings.near_limit_ratio,
            caps: settings.limits,
            default_failure_mode: settings.resilience.default_failure_mode,
            ..LimiterOptions::default()
        };
        let handle = Arc::new(ConfigHandle::new());
        handle.publish(config(&[]), Timestamp::from_secs(T0));
        let service = Arc::new(Service {
            limiter: RateLimiter::new(store.clone(), clock.clone(), options),
            config: handle,
        });
        let (reporter, _) = tonic_health::server::health_reporter();
        let health = Arc::new(Health::new(store, false, reporter));
        let router = ratelimitd::testing::router(HttpState {
            service: service.clone(),
            health,
            edges: Arc::new(settings.edges),
            caps: settings.limits,
            metrics: None,
        });
        InProcess {
            service,
            clock,
            router,
        }
    }

    /// `POST path` with `body`: the status and the body's bytes.
    pub(super) async fn post(
        &self,
        path: &str,
        body: Vec<u8>,
    ) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("a valid request");
        let resp = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("the router is infallible");
        let (parts, body) = resp.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .expect("the answer is in memory");
        (parts.status, parts.headers, bytes.to_vec())
    }
}

/// A single-threaded runtime for one target's cases.
pub(super) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}
