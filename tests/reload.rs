//! Config reload through the real server: files added, changed, deleted, renamed over, a
//! Kubernetes ConfigMap `..data` swap, a runtime-root symlink swap, bad files, duplicate domains,
//! health transitions. Waiting for a watcher is real time: every wait polls with a deadline.

mod common;

use std::future::Future;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use ratelimitd::app;
use ratelimitd::settings::Settings;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

/// Polls `cond` every 20 ms for at most 10 s.
async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn cfg(domain: &str, key: &str, rpu: u32) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit: {{unit: minute, requests_per_unit: {rpu}}}\n"
    )
}

async fn rlconfig(ts: &TestServer) -> String {
    let r = ts.http.get(ts.debug_url("/rlconfig")).send().await.unwrap();
    r.text().await.unwrap()
}

/// The `requests_per_unit` the service applies to `domain` / `key=v`, if any.
async fn limit(ts: &TestServer, domain: &str, key: &str) -> Option<u32> {
    let r = ts.call(request(domain, &[&[(key, "v")]])).await.ok()?;
    r.statuses[0]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit)
}

async fn wait_limit(ts: &TestServer, domain: &str, key: &str, want: Option<u32>) {
    let what = format!("{domain}/{key} limit {want:?}");
    eventually(&what, || async { limit(ts, domain, key).await == want }).await;
}

/// Writes `contents` to a temp file beside `path` and renames it over `path` (atomic replace).
fn replace(path: &Path, contents: &str) {
    let tmp = path.with_file_name(format!(
        ".{}.tmp",
        path.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A server on settings without `RATELIMITD_CONFIG` (Go `RUNTIME_*` discovery).
async fn start_runtime(dir: tempfile::TempDir, env: &[(&str, &str)]) -> TestServer {
    let mut vars: Vec<(String, String)> = [
        ("HOST", "127.0.0.1"),
        ("PORT", "0"),
        ("GRPC_HOST", "127.0.0.1"),
        ("GRPC_PORT", "0"),
        ("DEBUG_HOST", "127.0.0.1"),
        ("DEBUG_PORT", "0"),
        ("RATELIMITD_TEST_MANUAL_CLOCK", "1234"),
    ]
    .iter()
    .chain(env)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    vars.push(("RUNTIME_ROOT".into(), dir.path().display().to_string()));
    start_with(dir, Settings::from_env(vars).unwrap()).await
}

async fn start_with(dir: tempfile::TempDir, settings: Settings) -> TestServer {
    let running = app::start(&settings).await.unwrap();
    let url = format!("http://{}", running.grpc_addr);
    TestServer {
        grpc: ratelimitd::proto::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient::connect(url).await.unwrap(),
        running: Some(running),
        dir,
        http: reqwest::Client::new(),
    }
}

#[tokio::test]
async fn files_added_changed_renamed_over_and_deleted_are_applied() {
    let a = cfg("a", "k", 5);
    let ts = TestServer::start(&[("a.yaml", &a)], &[("RUNTIME_IGNOREDOTFILES", "true")]).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(5));
    std::fs::write(ts.dir.path().join("b.yaml"), cfg("b", "k", 9)).unwrap();
    wait_limit(&ts, "b", "k", Some(9)).await;
    std::fs::write(ts.dir.path().join("a.yaml"), cfg("a", "k", 6)).unwrap();
    wait_limit(&ts, "a", "k", Some(6)).await;
    // An editor's save: write a temp (dot) file, rename it over the original.
    replace(&ts.dir.path().join("a.yaml"), &cfg("a", "k", 7));
    wait_limit(&ts, "a", "k", Some(7)).await;
    std::fs::remove_file(ts.dir.path().join("b.yaml")).unwrap();
    wait_limit(&ts, "b", "k", None).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(7));
    assert_eq!(ts.running().config.load_failures(), 0);
    ts.shutdown().await;
}

#[tokio::test]
async fn a_single_config_file_is_reloaded_when_replaced_or_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limits.yaml");
    std::fs::write(&file, cfg("a", "k", 1)).unwrap();
    let f = file.display().to_string();
    let s = settings(
        dir.path(),
        &[("RATELIMITD_CONFIG", &f), ("CONFIG_POLL_INTERVAL", "0")],
    );
    let ts = start_with(dir, s).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    replace(&file, &cfg("a", "k", 2));
    wait_limit(&ts, "a", "k", Some(2)).await;
    std::fs::remove_file(&file).unwrap();
    eventually("a failed load of the missing file", || async {
        ts.running().config.load_failures() >= 1
    })
    .await;
    assert_eq!(limit(&ts, "a", "k").await, Some(2), "old config kept");
    std::fs::write(&file, cfg("a", "k", 3)).unwrap();
    wait_limit(&ts, "a", "k", Some(3)).await;
    ts.shutdown().await;
}

/// Lays out a ConfigMap volume version: `..<ts>/<files>`, then points `..data` at it with an
/// atomic rename of a fresh symlink, as the kubelet does, and removes the previous version.
fn configmap_version(mount: &Path, stamp: &str, files: &[(&str, String)], previous: Option<&str>) {
    let version = mount.join(stamp);
    std::fs::create_dir(&version).unwrap();
    for (name, contents) in files {
        std::fs::write(version.join(name), contents).unwrap();
        let top = mount.join(name);
        if std::fs::symlink_metadata(&top).is_err() {
            symlink(Path::new("..data").join(name), &top).unwrap();
        }
    }
    let tmp = mount.join("..data_tmp");
    symlink(stamp, &tmp).unwrap();
    std::fs::rename(&tmp, mount.join("..data")).unwrap();
    if let Some(prev) = previous {
        std::fs::remove_dir_all(mount.join(prev)).unwrap();
    }
}

#[tokio::test]
async fn a_configmap_data_symlink_swap_is_applied_by_events_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("ratelimit/config");
    std::fs::create_dir_all(&mount).unwrap();
    configmap_version(
        &mount,
        "..2026_11_21_01",
        &[("a.yaml", cfg("a", "k", 1))],
        None,
    );
    let env = [
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_WATCH_ROOT", "false"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("CONFIG_POLL_INTERVAL", "0"),
    ];
    let ts = start_runtime(dir, &env).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    let v2 = [("a.yaml", cfg("a", "k", 2)), ("b.yaml", cfg("b", "k", 20))];
    configmap_version(&mount, "..2026_11_21_02", &v2, Some("..2026_11_21_01"));
    wait_limit(&ts, "a", "k", Some(2)).await;
    wait_limit(&ts, "b", "k", Some(20)).await;
    // A second swap: the watch must follow the new `..data` target.
    let v3 = [("a.yaml", cfg("a", "k", 3)), ("b.yaml", cfg("b", "k", 30))];
    configmap_version(&mount, "..2026_11_21_03", &v3, Some("..2026_11_21_02"));
    wait_limit(&ts, "b", "k", Some(30)).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(3));
    assert_eq!(
        ts.running().config.load_failures(),
        0,
        "{}",
        rlconfig(&ts).await
    );
    ts.shutdown().await;
}

#[tokio::test]
async fn a_runtime_root_symlink_swap_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    for (v, rpu) in [("v1", 1), ("v2", 2)] {
        let d = dir.path().join(v).join("ratelimit/config");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.yaml"), cfg("a", "k", rpu)).unwrap();
    }
    let current = dir.path().join("current");
    symlink("v1", &current).unwrap();
    let root = current.display().to_string();
    let mut s = settings(dir.path(), &[("RUNTIME_SUBDIRECTORY", "ratelimit")]);
    s.config_path = None;
    s.runtime_root = root.into();
    let ts = start_with(dir, s).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    let tmp = ts.dir.path().join("current_tmp");
    symlink("v2", &tmp).unwrap();
    std::fs::rename(&tmp, &current).unwrap();
    wait_limit(&ts, "a", "k", Some(2)).await;
    // Editing a file under the new root counts too (the Go service would miss it).
    let file = ts.dir.path().join("v2/ratelimit/config/a.yaml");
    std::fs::write(file, cfg("a", "k", 4)).unwrap();
    wait_limit(&ts, "a", "k", Some(4)).await;
    ts.shutdown().await;
}

#[tokio::test]
async fn a_bad_file_keeps_the_old_limits_and_is_reported() {
    let ts = TestServer::start(&[("a.yaml", &cfg("a", "k", 5))], &[]).await;
    let bad = "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n";
    std::fs::write(ts.dir.path().join("a.yaml"), bad).unwrap();
    eventually("the failure to be counted", || async {
        ts.running().config.load_failures() == 1
    })
    .await;
    assert_eq!(
        limit(&ts, "a", "k").await,
        Some(5),
        "old limit still enforced"
    );
    let page = rlconfig(&ts).await;
    assert!(
        page.starts_with("a.k: unit=MINUTE requests_per_unit=5"),
        "{page}"
    );
    assert!(page.contains("# version: 1\n"), "{page}");
    assert!(page.contains("# config_load_error: 1\n"), "{page}");
    let err =
        "# last_error: a.yaml: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'";
    assert!(page.contains(err), "{page}");
    // Fixing it loads the fix and clears the error.
    std::fs::write(ts.dir.path().join("a.yaml"), cfg("a", "k", 8)).unwrap();
    wait_limit(&ts, "a", "k", Some(8)).await;
    let page = rlconfig(&ts).await;
    assert!(
        page.contains("# version: 2\n") && !page.contains("last_error"),
        "{page}"
    );
    assert_eq!(
        ts.running().config.load_failures(),
        1,
        "the bad file counted once"
    );
    ts.shutdown().await;
}

#[tokio::test]
async fn duplicate_domains_fail_unless_merged() {
    let (one, two) = (cfg("d", "one", 1), cfg("d", "two", 2));
    let files = [("1.yaml", one.as_str()), ("2.yaml", two.as_str())];
    let ts = TestServer::start(&files, &[]).await;
    assert_eq!(ts.running().config.load_failures(), 1);
    let e = ts.call(request("d", &[&[("one", "v")]])).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    assert!(
        rlconfig(&ts).await.contains("duplicate domain"),
        "{}",
        rlconfig(&ts).await
    );
    ts.shutdown().await;

    let ts = TestServer::start(&files, &[("MERGE_DOMAIN_CONFIG", "true")]).await;
    assert_eq!(limit(&ts, "d", "one").await, Some(1));
    assert_eq!(limit(&ts, "d", "two").await, Some(2));
    // A third file for the same domain merges on reload too.
    std::fs::write(ts.dir.path().join("3.yaml"), cfg("d", "three", 3)).unwrap();
    wait_limit(&ts, "d", "three", Some(3)).await;
    ts.shutdown().await;

    // Without merging, a duplicate arriving by reload is refused and the old config stays.
    let ts = TestServer::start(&files[..1], &[]).await;
    std::fs::write(ts.dir.path().join("2.yaml"), &two).unwrap();
    eventually("the duplicate to fail", || async {
        ts.running().config.load_failures() == 1
    })
    .await;
    assert_eq!(limit(&ts, "d", "one").await, Some(1));
    assert_eq!(limit(&ts, "d", "two").await, None);
    ts.shutdown().await;
}

async fn next_status(s: &mut tonic::Streaming<HealthCheckResponse>) -> ServingStatus {
    let msg = tokio::time::timeout(Duration::from_secs(10), s.message()).await;
    let status = msg.expect("a health update").unwrap().unwrap().status;
    ServingStatus::try_from(status).unwrap()
}

#[tokio::test]
async fn health_turns_healthy_when_a_config_appears_and_watch_follows() {
    let env = [("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true")];
    let mut ts = TestServer::start(&[], &env).await;
    let healthcheck = || async {
        ts.http
            .get(ts.http_url("/healthcheck"))
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(healthcheck().await, 500);
    let url = format!("http://{}", ts.running().grpc_addr);
    let mut health = HealthClient::new(
        tonic::transport::Channel::from_shared(url)
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let req = || HealthCheckRequest {
        service: "ratelimit".into(),
    };
    let mut watch = health.watch(req()).await.unwrap().into_inner();
    assert_eq!(next_status(&mut watch).await, ServingStatus::NotServing);
    std::fs::write(ts.dir.path().join("a.yaml"), cfg("a", "k", 1)).unwrap();
    eventually("healthy", || async { healthcheck().await == 200 }).await;
    assert_eq!(next_status(&mut watch).await, ServingStatus::Serving);
    let check = health.check(req()).await.unwrap().into_inner().status;
    assert_eq!(check, ServingStatus::Serving as i32);
    // Shutdown turns it unhealthy at once, then ends the stream so it cannot hold the drain.
    let running = ts.running.take().unwrap();
    let shutdown = tokio::spawn(running.shutdown());
    assert_eq!(next_status(&mut watch).await, ServingStatus::NotServing);
    let end = tokio::time::timeout(Duration::from_secs(10), watch.message()).await;
    assert!(matches!(end, Ok(Ok(None)) | Ok(Err(_))), "{end:?}");
    tokio::time::timeout(Duration::from_secs(5), shutdown)
        .await
        .expect("drain not held by the Watch stream")
        .unwrap();
}

#[tokio::test]
async fn reloads_keep_counters_and_requests_keep_their_snapshot() {
    let ts = TestServer::start(&[("a.yaml", &cfg("a", "k", 1))], &[]).await;
    assert_eq!(overall(&ts.rl("a", &[&[("k", "v")]]).await), Code::Ok);
    assert_eq!(
        overall(&ts.rl("a", &[&[("k", "v")]]).await),
        Code::OverLimit
    );
    let before = ts.running().config.snapshot().unwrap();
    let more = format!(
        "{}  - key: other\n    rate_limit: {{unit: hour, requests_per_unit: 3}}\n",
        cfg("a", "k", 1)
    );
    std::fs::write(ts.dir.path().join("a.yaml"), more).unwrap();
    wait_limit(&ts, "a", "other", Some(3)).await;
    assert_eq!(
        overall(&ts.rl("a", &[&[("k", "v")]]).await),
        Code::OverLimit,
        "counter survived"
    );
    let after = ts.running().config.snapshot().unwrap();
    assert_eq!((before.version, after.version), (1, 2));
    assert!(
        before.config.limits().len() < after.config.limits().len(),
        "old snapshot intact"
    );
    // A forced reload (what SIGHUP does) publishes even unchanged files.
    let forced = ts.running().reload_now().await;
    assert!(matches!(
        forced,
        ratelimitd::reload::ReloadOutcome::Loaded { version: 3, .. }
    ));
    ts.shutdown().await;
}

#[tokio::test]
async fn a_config_directory_deleted_and_recreated_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("a.yaml"), cfg("a", "k", 1)).unwrap();
    let c = conf.display().to_string();
    let s = settings(
        dir.path(),
        &[("RATELIMITD_CONFIG", &c), ("CONFIG_POLL_INTERVAL", "0")],
    );
    let ts = start_with(dir, s).await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1));
    std::fs::remove_dir_all(&conf).unwrap();
    eventually("the missing directory to fail", || async {
        ts.running().config.load_failures() >= 1
    })
    .await;
    assert_eq!(limit(&ts, "a", "k").await, Some(1), "old config kept");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("a.yaml"), cfg("a", "k", 2)).unwrap();
    wait_limit(&ts, "a", "k", Some(2)).await;
    // The new directory is watched: a later edit is seen too.
    std::fs::write(conf.join("a.yaml"), cfg("a", "k", 3)).unwrap();
    wait_limit(&ts, "a", "k", Some(3)).await;
    ts.shutdown().await;
}
