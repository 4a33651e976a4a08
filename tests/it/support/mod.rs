//! Test harness: starts the real service in-process on 127.0.0.1 ephemeral ports with a manual
//! clock, with config files written to a temp dir, and talks to it over real gRPC and HTTP
//! (`check` and `scrape` add `/check` and Prometheus to `TestServer`; `policy` the admin API).
//! The servers tests share and the programs they need: `stores`, `require`.
#![allow(dead_code)]

pub(crate) mod base_images;
pub(crate) mod binary_admin;
pub(crate) mod browser;
pub(crate) mod certs;
pub(crate) mod chaos;
pub(crate) mod check;
pub(crate) mod dockerfile;
pub(crate) mod dynalite;
pub(crate) mod envoy;
pub(crate) mod examples;
pub(crate) mod fleet;
pub(crate) mod guard;
pub(crate) mod leases;
pub(crate) mod memcached;
pub(crate) mod openapi;
pub(crate) mod otlp;
pub(crate) mod podman;
pub(crate) mod policy;
pub(crate) mod postgres;
pub(crate) mod process;
pub(crate) mod raw_grpc;
pub(crate) mod redis;
pub(crate) mod reload;
pub(crate) mod require;
pub(crate) mod rlqs;
pub(crate) mod scrape;
pub(crate) mod sentinel;
pub(crate) mod statsd;
pub(crate) mod stores;
pub(crate) mod valkey;
pub(crate) mod xds;

use std::time::Duration;

use ratelimitd::Settings;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest, RateLimitResponse, rate_limit_response,
};
use ratelimitd::testing::{self, Running};
use ratelimitd_core::clock::Timestamp;
use tonic::transport::Channel;

pub(crate) use rate_limit_response::Code;
#[allow(unused_imports)] // The OTLP test binary uses the harness without skipping anything.
pub(crate) use require::require;
#[allow(unused_imports)] // Used by the files whose scenarios run on every store.
pub(crate) use stores::{StoreKind, on_every_store};

/// Start time of the manual clock unless a test says otherwise.
pub(crate) const T0: u64 = 1234;

/// A running service and clients for it.
pub(crate) struct TestServer {
    pub running: Option<Running>,
    pub dir: tempfile::TempDir,
    pub grpc: RateLimitServiceClient<Channel>,
    pub http: reqwest::Client,
}

#[allow(unused_imports)] // The tracing test binaries send no hand-built descriptor.
pub(crate) use ratelimitd::testing::{LOOPBACK, descriptor, request};

/// Settings for a test: loopback, ephemeral ports, manual clock at `T0`, plus `env` overrides.
pub(crate) fn settings(dir: &std::path::Path, env: &[(&str, &str)]) -> Settings {
    let mut vars: Vec<(String, String)> = LOOPBACK
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.extend([
        ("RATELIMITD_CONFIG".into(), dir.display().to_string()),
        ("RATELIMITD_TEST_MANUAL_CLOCK".into(), T0.to_string()),
        // As in `docs/design/contract.md#scenarios`: no StatsD unless a test asks for it.
        ("USE_STATSD".into(), "false".into()),
        // No policy database (it would default to ./data) unless a test asks for one.
        ("POLICY_ENABLED".into(), "false".into()),
        // Many tests start on an empty directory and write their config later; refusing an empty
        // start is the binary's concern (tests/it/ops/loud_config.rs), not theirs.
        ("ALLOW_EMPTY_CONFIG".into(), "true".into()),
    ]);
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Settings::from_env(vars).expect("test settings are valid")
}

impl TestServer {
    /// Starts a service whose config dir holds `files` (name, YAML), on `redis` when given.
    pub(crate) async fn start_on(
        files: &[(&str, &str)],
        env: &[(&str, &str)],
        redis: Option<&redis::RedisServer>,
    ) -> TestServer {
        let mut all: Vec<(String, String)> = redis.map(redis::RedisServer::env).unwrap_or_default();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let env: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        TestServer::start(files, &env).await
    }

    /// Starts a service whose config dir holds `files` (name, YAML).
    pub(crate) async fn start(files: &[(&str, &str)], env: &[(&str, &str)]) -> TestServer {
        TestServer::try_start(files, env)
            .await
            .expect("service starts")
    }

    /// As `start`, but a service that refuses to start gives its error text.
    pub(crate) async fn try_start(
        files: &[(&str, &str)],
        env: &[(&str, &str)],
    ) -> Result<TestServer, String> {
        let dir = tempfile::tempdir().unwrap();
        for (name, yaml) in files {
            std::fs::write(dir.path().join(name), yaml).unwrap();
        }
        let running = testing::start(&settings(dir.path(), env))
            .await
            .map_err(|e| e.to_string())?;
        let grpc = RateLimitServiceClient::connect(format!("http://{}", running.grpc_addr))
            .await
            .unwrap();
        Ok(TestServer {
            running: Some(running),
            dir,
            grpc,
            http: reqwest::Client::new(),
        })
    }

    pub(crate) fn running(&self) -> &Running {
        self.running.as_ref().unwrap()
    }

    /// Sets the manual clock to `secs` after the epoch.
    pub(crate) fn set_time(&self, secs: u64) {
        self.running()
            .manual_clock
            .as_ref()
            .unwrap()
            .set(Timestamp::from_secs(secs));
    }

    /// Moves the manual clock forward.
    pub(crate) fn advance(&self, d: Duration) {
        self.running().manual_clock.as_ref().unwrap().advance(d);
    }

    /// One `ShouldRateLimit` call.
    pub(crate) async fn call(
        &self,
        req: RateLimitRequest,
    ) -> Result<RateLimitResponse, tonic::Status> {
        self.grpc
            .clone()
            .should_rate_limit(req)
            .await
            .map(tonic::Response::into_inner)
    }

    /// One call with plain descriptors and one hit; panics on a gRPC error.
    pub(crate) async fn rl(
        &self,
        domain: &str,
        descriptors: &[&[(&str, &str)]],
    ) -> RateLimitResponse {
        self.call(request(domain, descriptors))
            .await
            .expect("ShouldRateLimit succeeds")
    }

    pub(crate) fn http_url(&self, path: &str) -> String {
        format!("http://{}{}", self.running().http_addr, path)
    }

    /// POSTs `body` to `path` on the HTTP port; panics when the request cannot be sent.
    pub(crate) async fn post(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.http
            .post(self.http_url(path))
            .body(body)
            .send()
            .await
            .expect("the HTTP port answers")
    }

    /// The body of a GET of `url` (one of [`Self::debug_url`], [`Self::admin_url`]...), sent with
    /// `token` as its bearer token when there is one; panics when the request cannot be sent.
    pub(crate) async fn get_text(&self, url: &str, token: Option<&str>) -> String {
        let mut req = self.http.get(url);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let r = req.send().await.expect("the service answers");
        r.text().await.unwrap()
    }

    pub(crate) fn debug_url(&self, path: &str) -> String {
        format!("http://{}{}", self.running().debug_addr, path)
    }

    /// A URL on the admin listener (`/v1/*`).
    pub(crate) fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.running().admin_addr, path)
    }

    pub(crate) async fn shutdown(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// `(code, Some((requests_per_unit, unit name, limit name)), remaining)` of status `i`, for compact asserts.
pub(crate) fn st(r: &RateLimitResponse, i: usize) -> (Code, Option<(u32, String, String)>, u32) {
    let s = &r.statuses[i];
    let limit = s.current_limit.as_ref().map(|l| {
        let unit = rate_limit_response::rate_limit::Unit::try_from(l.unit).unwrap();
        (
            l.requests_per_unit,
            unit.as_str_name().to_string(),
            l.name.clone(),
        )
    });
    (Code::try_from(s.code).unwrap(), limit, s.limit_remaining)
}

/// The overall code.
pub(crate) fn overall(r: &RateLimitResponse) -> Code {
    Code::try_from(r.overall_code).unwrap()
}

/// `Some((rpu, "UNIT", ""))` shorthand.
pub(crate) fn lim(rpu: u32, unit: &str) -> Option<(u32, String, String)> {
    Some((rpu, unit.to_string(), String::new()))
}

/// Seconds of `duration_until_reset` of status `i`.
pub(crate) fn dur(r: &RateLimitResponse, i: usize) -> Option<i64> {
    r.statuses[i]
        .duration_until_reset
        .as_ref()
        .map(|d| d.seconds)
}

/// The keys of [`each_algorithm`]'s descriptors, one per algorithm: fixed window, sliding window,
/// sliding log, token bucket and leaky bucket.
pub(crate) const ALGORITHM_KEYS: [&str; 5] = ["fw", "sw", "sl", "tb", "lb"];

/// A config of `domain` with one descriptor per algorithm ([`ALGORITHM_KEYS`]), each `limit`
/// hits per `unit` (the buckets' burst is the default, `limit`); `more` is appended to its
/// descriptors as it is.
pub(crate) fn each_algorithm(domain: &str, limit: u32, unit: &str, more: &str) -> String {
    let mut yaml = format!("domain: {domain}\ndescriptors:\n");
    let algorithms = [
        "fixed_window",
        "sliding_window",
        "sliding_log",
        "token_bucket",
        "leaky_bucket",
    ];
    for (key, algorithm) in ALGORITHM_KEYS.into_iter().zip(algorithms) {
        yaml.push_str(&format!(
            "  - {{key: {key}, rate_limit: {{unit: {unit}, requests_per_unit: {limit}, algorithm: {algorithm}}}}}\n"
        ));
    }
    yaml + more
}

/// CFG-BASIC of `docs/design/contract.md#cfg-basic`.
pub(crate) const CFG_BASIC: &str = include_str!("../../fixtures/config/cfg-basic.yaml");

/// CFG-WILD of `docs/design/contract.md#cfg-wild`.
pub(crate) const CFG_WILD: &str = include_str!("../../fixtures/config/cfg-wild.yaml");

/// CFG-INT of `docs/design/contract.md#cfg-int` (two files): its domain `basic`.
pub(crate) const CFG_INT_BASIC: &str = include_str!("../../fixtures/config/cfg-int-basic.yaml");

/// CFG-INT's second file, domain `another`.
pub(crate) const CFG_INT_ANOTHER: &str = include_str!("../../fixtures/config/cfg-int-another.yaml");
