//! Helpers for reload tests: config text, bounded waits for a watcher, limits as the service
//! applies them, atomic file replacement, and servers on arbitrary settings.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use ratelimitd::Settings;
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::testing;
use ratelimitd_core::clock::Stopwatch;

use super::{TestServer, request};

/// Polls `cond` every 20 ms for at most 10 s.
pub(crate) async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let watch = Stopwatch::start();
    while watch.elapsed() < Duration::from_secs(10) {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

pub(crate) fn cfg(domain: &str, key: &str, rpu: u32) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit: {{unit: minute, requests_per_unit: {rpu}}}\n"
    )
}

pub(crate) async fn rlconfig(ts: &TestServer) -> String {
    let r = ts.http.get(ts.debug_url("/rlconfig")).send().await.unwrap();
    r.text().await.unwrap()
}

/// The `requests_per_unit` the service applies to `domain` / `key=v`, if any.
pub(crate) async fn limit(ts: &TestServer, domain: &str, key: &str) -> Option<u32> {
    let r = ts.call(request(domain, &[&[(key, "v")]])).await.ok()?;
    r.statuses[0]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit)
}

pub(crate) async fn wait_limit(ts: &TestServer, domain: &str, key: &str, want: Option<u32>) {
    let what = format!("{domain}/{key} limit {want:?}");
    eventually(&what, || async { limit(ts, domain, key).await == want }).await;
}

/// Writes `contents` to a temp file beside `path` and renames it over `path` (atomic replace).
pub(crate) fn replace(path: &Path, contents: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A server on the usual test settings plus `env`, but finding its configuration the Go way
/// (`RUNTIME_*` discovery under `root`) instead of through `RATELIMITD_CONFIG`.
pub(crate) async fn start_runtime(
    dir: tempfile::TempDir,
    root: &Path,
    env: &[(&str, &str)],
) -> TestServer {
    let mut s = super::settings(dir.path(), env);
    s.config_path = None;
    s.runtime_root = root.into();
    start_with(dir, s).await
}

pub(crate) async fn start_with(dir: tempfile::TempDir, settings: Settings) -> TestServer {
    let running = testing::start(&settings).await.unwrap();
    let url = format!("http://{}", running.grpc_addr);
    TestServer {
        grpc: RateLimitServiceClient::connect(url).await.unwrap(),
        running: Some(running),
        dir,
        http: reqwest::Client::new(),
    }
}
