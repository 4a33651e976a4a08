//! What a reload does, through the real server: a bad file keeps the old limits and is reported,
//! duplicate domains with and without merging, health (HTTP and gRPC `Watch`) following loads and
//! shutdown, counters and in-flight snapshots surviving reloads.

use std::time::Duration;

use crate::support::reload::*;
use crate::support::*;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

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
    assert!(matches!(end, Ok(Ok(None) | Err(_))), "{end:?}");
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
        ratelimitd::testing::ReloadOutcome::Loaded { version: 3, .. }
    ));
    ts.shutdown().await;
}
